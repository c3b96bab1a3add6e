//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The environment every test of the package shares.
var (
	restCfg    *rest.Config
	kube       kubernetes.Interface
	kubeconfig string
	testEnv    *envtest.Environment
	tempDir    string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// run starts kube-apiserver and etcd with the CRDs, runs the tests and
// stops everything again.
func run(m *testing.M) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run make integration, or point it at a directory with kube-apiserver, etcd and kubectl (make envtest)")
	}
	dir, err := os.MkdirTemp("", "xila-guard-webhook-integration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	tempDir = dir

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "api", "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	testEnv = env
	if restCfg, err = env.Start(); err != nil {
		return 0, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()
	if kube, err = kubernetes.NewForConfig(restCfg); err != nil {
		return 0, err
	}
	user, err := env.AddUser(envtest.User{Name: "xila-guard-webhook", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return 0, fmt.Errorf("adding the webhook's user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return 0, err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return 0, err
	}
	if err := fixtures(context.Background()); err != nil {
		return 0, fmt.Errorf("creating the fixtures: %w", err)
	}
	return m.Run(), nil
}

// Fixture names. Tenant acme owns acme-ml and acme-faults (listed by its
// TenantBinding; acme-faults is labelled too); web belongs to no tenant;
// nopolicy is listed by the binding of tenant ghost, which names no
// policy; forged carries acme's tenant label but no binding lists it.
// gpu-1 is in acme's pool, cpu-1 in none.
const (
	tenantNS   = "acme-ml"
	faultsNS   = "acme-faults"
	plainNS    = "web"
	noPolicyNS = "nopolicy"
	forgedNS   = "forged"
	poolNode   = "gpu-1"
	plainNode  = "cpu-1"
	policyName = "acme-policy"
)

func fixtures(ctx context.Context) error {
	gc, err := guardClient()
	if err != nil {
		return err
	}
	policy := fixture.MakePlacementPolicy(policyName, v1alpha1.SourceAttested).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj()
	if err := gc.Post().Resource("placementpolicies").Body(policy).Do(ctx).Error(); err != nil {
		return fmt.Errorf("creating the policy: %w", err)
	}
	binding := fixture.MakeTenantBinding("acme", tenantNS, faultsNS).Policy(policyName).Obj()
	ghost := fixture.MakeTenantBinding("ghost", noPolicyNS).NoPolicy().Obj()
	for _, b := range []*v1alpha1.TenantBinding{binding, ghost} {
		if err := gc.Post().Resource("tenantbindings").Body(b).Do(ctx).Error(); err != nil {
			return fmt.Errorf("creating the binding %s: %w", b.Name, err)
		}
	}
	for _, ns := range []*corev1.Namespace{
		fixture.MakeNamespace(tenantNS).Obj(),
		fixture.MakeNamespace(faultsNS).Tenant("acme").Obj(),
		fixture.MakeNamespace(plainNS).Obj(),
		fixture.MakeNamespace(noPolicyNS).Tenant("ghost").Obj(),
		fixture.MakeNamespace(forgedNS).Tenant("acme").Obj(),
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// gpu-1 carries the pool label without the pool taint.
	for _, node := range []*corev1.Node{fixture.MakeNode(poolNode).Label(guard.LabelTenantPool, "acme").Obj(), fixture.MakeNode(plainNode).Obj()} {
		n, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if n.Name == poolNode {
			if err := createState(ctx, gc, n.Name, n.UID, v1alpha1.SharingExclusive); err != nil {
				return err
			}
		}
	}
	return nil
}

// createState writes fresh attested evidence of one GPU shared as mode
// for the node, naming the node UID uid.
func createState(ctx context.Context, gc rest.Interface, node string, uid types.UID, mode v1alpha1.GPUSharingMode) error {
	nss := fixture.MakeNodeSecurityState(node, uid, v1alpha1.SourceAttested).Incarnation("i1").
		Device(v1alpha1.GPUDevice{ID: "0", Vendor: "nvidia", Model: "H100", SharingMode: mode}).Obj()
	_ = gc.Delete().Resource("nodesecuritystates").Name(node).Do(ctx).Error()
	if err := gc.Post().Resource("nodesecuritystates").Body(nss).Do(ctx).Error(); err != nil {
		return fmt.Errorf("creating the state of node %s: %w", node, err)
	}
	return nil
}

// setState is createState for a test.
func setState(t *testing.T, node string, uid types.UID, mode v1alpha1.GPUSharingMode) {
	t.Helper()
	gc, err := guardClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := createState(t.Context(), gc, node, uid, mode); err != nil {
		t.Fatal(err)
	}
}
