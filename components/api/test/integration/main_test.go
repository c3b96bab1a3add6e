//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The test environment, shared by every test of the package.
var (
	k8s        client.Client
	kubeconfig string
	kubectl    string
	ctx        = context.Background()
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// run starts kube-apiserver and etcd with the CRDs installed, runs the
// tests, and stops them again.
func run(m *testing.M) (int, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set: point it at a directory with kube-apiserver, etcd and kubectl (hack/build-tools.sh builds them into _output/bin)")
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := exec.LookPath(filepath.Join(assets, bin)); err != nil {
			return 0, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no usable %s: %w", assets, bin, err)
		}
	}
	kubectl = filepath.Join(assets, "kubectl")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return 0, err
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return 0, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()

	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return 0, fmt.Errorf("adding a kubectl user: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "xila-guard-integration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// runKubectl runs the real kubectl against the test API server.
func runKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
