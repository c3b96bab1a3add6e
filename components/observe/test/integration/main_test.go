//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The test environment, shared by every test of the package.
var (
	cfg    *rest.Config
	k8s    client.Client
	scheme = runtime.NewScheme()
	// testEnv is the running API server, for adding users.
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run make envtest and point it at _output/envtest")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := exec.LookPath(filepath.Join(assets, bin)); err != nil {
			return 0, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no usable %s: %w", assets, bin, err)
		}
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return 0, err
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "api", "config", "crd")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	testEnv = env
	var err error
	if cfg, err = env.Start(); err != nil {
		return 0, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// startManager runs a manager with the controllers that setup registers
// until the test ends.
func startManager(t *testing.T, setup func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
