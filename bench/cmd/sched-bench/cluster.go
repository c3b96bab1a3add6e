package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/bench/internal/apiserver"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// cluster is the API server the benchmark runs against; its kubeconfig is
// the scheduler's.
type cluster struct{ *apiserver.Server }

// startCluster starts kube-apiserver and etcd with the guard CRDs.
func startCluster(o *options) (*cluster, error) {
	s, err := apiserver.Start(o.assets, o.crds, "scheduler", "sched-bench")
	return &cluster{s}, err
}

func (c *cluster) stop() { c.Stop() }

// Names of the benchmark's objects.
const (
	plainNamespace = "bench-plain"
	policyName     = "bench"
)

func tenantID(i int) string { return fmt.Sprintf("tenant-%d", i) }

// populate creates the tenants, their policy and the nodes; pool nodes get
// compliant, attested evidence.
func (c *cluster) populate(ctx context.Context, o *options) error {
	policy := &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: v1alpha1.PlacementPolicySpec{
			Confinement: v1alpha1.ConfinementPool,
			Evidence: v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested},
				MaxAge: &metav1.Duration{Duration: 24 * time.Hour}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}},
		}}
	if err := c.Guard.Create(ctx, policy); err != nil {
		return err
	}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plainNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range o.tenants {
		id := tenantID(i)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{guard.LabelTenant: id}}}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
		b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: id, Namespaces: []string{id}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: policyName}}}
		if err := c.Guard.Create(ctx, b); err != nil {
			return err
		}
	}
	return parallel(ctx, o.nodes, func(ctx context.Context, i int) error {
		pool, gpus := "", 0
		switch {
		case i < o.poolNodes:
			pool, gpus = tenantID(i%o.tenants), gpusPerNode
		case i < o.poolNodes+o.generalGPUNodes:
			gpus = gpusPerNode
		}
		return c.createNode(ctx, fmt.Sprintf("node-%04d", i), pool, zoneName(i), gpus)
	})
}

// Every node is in one of zones zones; GPU nodes offer gpusPerNode GPUs.
const (
	zones       = 3
	gpusPerNode = 8
	gpuResource = corev1.ResourceName("nvidia.com/gpu")
)

func zoneName(i int) string { return fmt.Sprintf("zone-%d", i%zones) }

func (c *cluster) createNode(ctx context.Context, name, pool, zone string, gpus int) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelTopologyZone: zone}}}
	if pool != "" {
		n.Labels[guard.LabelTenantPool] = pool
		n.Spec.Taints = []corev1.Taint{{Key: guard.TaintTenantPool, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	}
	created, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	if gpus > 0 {
		room[gpuResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	created.Status.Capacity, created.Status.Allocatable = room, room
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if created, err = c.Kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// Without a node controller nothing lifts the not-ready taint the API
	// server puts on new nodes.
	created.Spec.Taints = n.Spec.Taints
	if created, err = c.Kube.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if pool == "" {
		return nil
	}
	devices := make([]v1alpha1.GPUDevice, gpus)
	for i := range devices {
		devices[i] = v1alpha1.GPUDevice{ID: fmt.Sprintf("gpu-%d", i), Vendor: "nvidia", Model: "NVIDIA-H100-80GB-HBM3",
			SharingMode: v1alpha1.SharingExclusive, CCMode: v1alpha1.CCModeOn}
	}
	return c.Guard.Create(ctx, &v1alpha1.NodeSecurityState{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{guard.LabelTenantPool: pool}},
		Spec: v1alpha1.NodeSecurityStateSpec{NodeUID: created.UID, Incarnation: "boot-1", ObservedAt: metav1.Now(),
			Source: v1alpha1.SourceAttested, Complete: true, Devices: devices},
	})
}

// parallel runs fn for 0..n-1 on 16 workers and returns the first error.
func parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
