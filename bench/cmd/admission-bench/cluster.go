package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// cluster is the API server and etcd the benchmark runs against.
type cluster struct {
	env   *envtest.Environment
	cfg   *rest.Config
	kube  kubernetes.Interface
	guard client.Client
	// kubeconfig is the webhook's, as a user with full rights.
	kubeconfig string
	dir        string
	// apiserver and etcd are the pids of the two processes.
	apiserver, etcd int
}

// startCluster starts kube-apiserver and etcd with the guard CRDs.
func startCluster(o *options) (*cluster, error) {
	os.Setenv("KUBEBUILDER_ASSETS", o.assets)
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c := &cluster{env: &envtest.Environment{CRDDirectoryPaths: []string{o.crds}, ErrorIfCRDPathMissing: true, Scheme: scheme}}
	cfg, err := c.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", o.assets, err)
	}
	c.cfg = rest.CopyConfig(cfg)
	c.cfg.QPS, c.cfg.Burst = -1, -1
	if c.kube, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return nil, err
	}
	if c.guard, err = client.New(c.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	user, err := c.env.AddUser(envtest.User{Name: "xila-guard-webhook", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	if c.dir, err = os.MkdirTemp("", "admission-bench-"); err != nil {
		return nil, err
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, data, 0o600); err != nil {
		return nil, err
	}
	children := host.Children()
	if len(children["kube-apiserver"]) != 1 || len(children["etcd"]) != 1 {
		return nil, fmt.Errorf("want one kube-apiserver and one etcd among this process's children, got %v", children)
	}
	c.apiserver, c.etcd = children["kube-apiserver"][0], children["etcd"][0]
	return c, nil
}

func (c *cluster) stop() {
	_ = c.env.Stop()
	os.RemoveAll(c.dir)
}

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
		if err := c.guard.Create(ctx, policy); err != nil {
			return fmt.Errorf("creating policy %s: %w", id, err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{guard.LabelTenant: id}}}
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", id, err)
		}
		b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: id, Namespaces: []string{id}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: id}}}
		if err := c.guard.Create(ctx, b); err != nil {
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
