//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/testenv"
)

// The test environment, shared by every test of the package.
var (
	cfg    *rest.Config
	k8s    client.Client
	scheme *runtime.Scheme
	// testEnv is the running API server, for adding users.
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	// DeviceTaintRules for the device tainter: alpha in Kubernetes 1.35.
	o := testenv.Options{FeatureGates: []string{"DRADeviceTaints", "DRADeviceTaintRules"}, RuntimeConfig: []string{"resource.k8s.io/v1alpha3"}}
	testenv.MainWith(m, o, func(e *testenv.Env) error {
		cfg, k8s, scheme, testEnv = e.Config, e.Client, e.Scheme, e.Environment
		return nil
	})
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
