package lab

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The guard kinds.
var (
	Policies = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "placementpolicies"}
	Bindings = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "tenantbindings"}
	States   = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "nodesecuritystates"}
	// PolicyReports are the violation reports the observe controller writes.
	PolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
)

// Indexes of the workers in Tenant.Workers.
const (
	CompliantWorker  = 0 // mock evidence, exclusive GPUs
	TimeSlicedWorker = 1 // mock evidence, time-sliced GPUs
)

// Tenant is a tenant of the lab: its namespace (named after it), a
// PlacementPolicy that accepts only attested evidence and forbids
// time-slicing, its TenantBinding, and a pool of the two workers.
type Tenant struct {
	Name    string
	Workers []string
	c       *Cluster
}

// Workers lists the nodes that are not control planes, sorted.
func (c *Cluster) Workers(ctx context.Context) ([]string, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!node-role.kubernetes.io/control-plane"})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) < 2 {
		return nil, fmt.Errorf("need 2 workers, the cluster has %v", names)
	}
	return names[:2], nil
}

// CreateTenantOf makes the tenant of policy: a namespace named after the
// policy, labelled with the tenant, the policy, and the TenantBinding that
// lists the namespace and selects the policy.
func (c *Cluster) CreateTenantOf(ctx context.Context, policy *v1alpha1.PlacementPolicy) error {
	name := policy.Name
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, fixture.MakeNamespace(name).Tenant(name).Obj(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the tenant's namespace: %w", err)
	}
	if err := c.Replace(ctx, policy); err != nil {
		return err
	}
	return c.Replace(ctx, fixture.MakeTenantBinding(name, name).Obj())
}

// CreateTenant makes a tenant and turns the workers into its pool: worker
// 1 compliant, worker 2 time-sliced, both with mock evidence.
func (c *Cluster) CreateTenant(ctx context.Context, name string) (*Tenant, error) {
	workers, err := c.Workers(ctx)
	if err != nil {
		return nil, err
	}
	t := &Tenant{Name: name, Workers: workers, c: c}
	if err := c.CreateTenantOf(ctx, PoolPolicy(name).Obj()); err != nil {
		return nil, err
	}
	for _, w := range workers {
		if _, err := c.SetPool(ctx, w, name); err != nil {
			return nil, err
		}
	}
	return t, t.mockEvidence(ctx)
}

// PoolPolicy is a tenant's policy: its pool only, attested evidence only
// (mock under the lab profile), no time-slicing.
func PoolPolicy(name string) *fixture.PlacementPolicyWrapper {
	return fixture.MakePlacementPolicy(name, v1alpha1.SourceAttested).ForbidSharing(v1alpha1.SharingTimeSlicing)
}

// mockEvidence writes the workers' mock evidence: one GPU each, exclusive
// on worker 1 and time-sliced on worker 2.
func (t *Tenant) mockEvidence(ctx context.Context) error {
	return t.writeEvidence(ctx, func(string, v1alpha1.GPUSharingMode) ([]v1alpha1.GPUDevice, error) {
		return []v1alpha1.GPUDevice{{ID: "gpu-0", Vendor: "nvidia"}}, nil
	})
}

// writeEvidence writes the workers' mock evidence with the GPUs gpus
// returns for each, by default exclusive on worker 1 and time-sliced on
// worker 2.
func (t *Tenant) writeEvidence(ctx context.Context, gpus func(node string, mode v1alpha1.GPUSharingMode) ([]v1alpha1.GPUDevice, error)) error {
	for i, w := range t.Workers {
		sharing := v1alpha1.SharingExclusive
		if i == TimeSlicedWorker {
			sharing = v1alpha1.SharingTimeSlicing
		}
		node, err := t.c.Kube.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
		if err != nil {
			return err
		}
		devs, err := gpus(w, sharing)
		if err != nil {
			return err
		}
		state := fixture.MakeNodeSecurityState(w, node.UID, v1alpha1.SourceMock).Label(PoolLabel, t.Name).Incarnation("lab-1")
		for _, d := range devs {
			if d.SharingMode == "" {
				d.SharingMode = sharing
			}
			state.Device(d)
		}
		if err := t.c.Replace(ctx, state.Obj()); err != nil {
			return err
		}
	}
	return nil
}

// RestoreEvidence gives the workers the tenant's mock evidence back.
func (t *Tenant) RestoreEvidence(ctx context.Context) error { return t.mockEvidence(ctx) }

// Delete removes the tenant: first its namespace and pods (the pool label
// is locked while they run), then the pool and the guard objects.
func (t *Tenant) Delete(ctx context.Context) error {
	return t.c.DeleteTenant(ctx, t.Name)
}

// DeleteTenant removes a tenant by name, whether or not it exists, and
// gives the workers back.
func (c *Cluster) DeleteTenant(ctx context.Context, name string) error {
	var errs []error
	if err := c.DeleteNamespace(ctx, name); err != nil {
		errs = append(errs, err)
	}
	workers, err := c.Workers(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, w := range workers {
		if n, err := c.Kube.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{}); err == nil && n.Labels[PoolLabel] == name {
			if _, err := c.SetPool(ctx, w, ""); err != nil {
				errs = append(errs, err)
			}
			if err := c.Dyn.Resource(States).Delete(ctx, w, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{Bindings, Policies} {
		if err := c.Dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteNamespace deletes a namespace and waits until it is gone.
func (c *Cluster) DeleteNamespace(ctx context.Context, name string) error {
	zero := int64(0)
	_ = c.Kube.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s is still there: %w", name, err)
	}
	return nil
}

// SetPool labels and taints a worker as a member of pool, or removes both
// when pool is empty.
func (c *Cluster) SetPool(ctx context.Context, name, pool string) (*corev1.Node, error) {
	var node *corev1.Node
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		taints := n.Spec.Taints[:0]
		for _, taint := range n.Spec.Taints {
			if taint.Key != PoolLabel {
				taints = append(taints, taint)
			}
		}
		delete(n.Labels, PoolLabel)
		if pool != "" {
			n.Labels[PoolLabel] = pool
			taints = append(taints, corev1.Taint{Key: PoolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = taints
		node, last = c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("setting the pool of node %s to %q: %w (last error: %v)", name, pool, err, last)
	}
	return node, nil
}

// State returns the NodeSecurityState of node.
func (c *Cluster) State(ctx context.Context, node string) (*v1alpha1.NodeSecurityState, error) {
	u, err := c.Dyn.Resource(States).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s := &v1alpha1.NodeSecurityState{}
	return s, fixture.FromUnstructured(u, s)
}

// Replace creates obj, a typed guard object (fixture's builders make
// them), deleting first any object of its kind and name.
func (c *Cluster) Replace(ctx context.Context, obj runtime.Object) error {
	u, err := fixture.ToUnstructured(obj)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(u.GroupVersionKind())
	var r dynamic.ResourceInterface = c.Dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		r = c.Dyn.Resource(gvr).Namespace(ns)
	}
	_ = r.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := r.Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil // the old one is still being deleted
		}
		return true, err
	})
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", gvr.Resource, u.GetName(), err)
	}
	return nil
}
