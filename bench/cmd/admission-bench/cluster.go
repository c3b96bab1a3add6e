package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/bench/internal/apiserver"
	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// cluster is the API server and etcd the benchmark runs against; its
// kubeconfig is the webhook's, as a user with full rights.
type cluster struct {
	*apiserver.Server
	// apiserver and etcd are the pids of the two processes.
	apiserver, etcd int
}

// startCluster starts kube-apiserver and etcd with the guard CRDs.
func startCluster(o *options) (*cluster, error) {
	s, err := apiserver.Start(o.assets, o.crds, "xila-guard-webhook", "admission-bench")
	if err != nil {
		return nil, err
	}
	children := host.Children()
	if len(children["kube-apiserver"]) != 1 || len(children["etcd"]) != 1 {
		s.Stop()
		return nil, fmt.Errorf("want one kube-apiserver and one etcd among this process's children, got %v", children)
	}
	return &cluster{Server: s, apiserver: children["kube-apiserver"][0], etcd: children["etcd"][0]}, nil
}

func (c *cluster) stop() { c.Stop() }

func tenantID(i int) string { return fmt.Sprintf("tenant-%02d", i) }

// populate creates, for each tenant, its namespace (with the tenant label,
// as the chart's tenant resources make it), its PlacementPolicy and its
// TenantBinding.
func (c *cluster) populate(ctx context.Context, tenants int) error {
	for i := range tenants {
		id := tenantID(i)
		policy := &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: id},
			Spec: v1alpha1.PlacementPolicySpec{
				Confinement: v1alpha1.ConfinementPool,
				Evidence:    v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}},
				GPUSharing:  &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}},
			}}
		if err := c.Guard.Create(ctx, policy); err != nil {
			return fmt.Errorf("creating policy %s: %w", id, err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{guard.LabelTenant: id}}}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", id, err)
		}
		b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: id, Namespaces: []string{id}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: id}}}
		if err := c.Guard.Create(ctx, b); err != nil {
			return fmt.Errorf("creating binding %s: %w", id, err)
		}
	}
	return nil
}

// settle waits until kube-apiserver is at rest, its start-up work done
// (below 5% of a CPU over 5 s, for at most three minutes), and returns the
// share of a CPU it used in the last 5 s.
func (c *cluster) settle(ctx context.Context) (float64, error) {
	const window = 5 * time.Second
	deadline := time.Now().Add(3 * time.Minute)
	for {
		before := host.ProcCPU(c.apiserver)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		share := float64(host.ProcCPU(c.apiserver)-before) / float64(window)
		if share < 0.05 || time.Now().After(deadline) {
			return share, nil
		}
	}
}
