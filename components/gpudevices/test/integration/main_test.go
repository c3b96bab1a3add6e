//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/testenv"
	"github.com/xila-guard/xila-guard/components/gpudevices/app"
)

// platformNamespace is the controller's --namespace.
const platformNamespace = "xila-guard"

// serviceAccount is the user the controller runs as, bound only to the
// ClusterRole of config/rbac/role.yaml.
const serviceAccount = "system:serviceaccount:" + platformNamespace + ":xila-guard-gpudevices"

// vmiCRD is KubeVirt's VirtualMachineInstance CRD, as hack/update-codegen.sh
// generates it.
var vmiCRD = filepath.Join("..", "..", "config", "kubevirt-crds", "kubevirt.io_virtualmachineinstances.yaml")

// The test environment, shared by every test of the package.
var (
	// k8s reaches the API server as a cluster administrator.
	k8s client.Client
	// noVMIsErr is what the controller returned when started before the
	// VMI CRD was installed.
	noVMIsErr error
	// initialSettings are the settings as first seen, before any
	// class existed.
	initialSettings *gpuv1alpha1.GPUSettings
	// metricsAddr and probeAddr are where the controller serves.
	metricsAddr, probeAddr string
	// logFile holds the controller's JSON logs.
	logFile string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the API server, checks that the controller refuses to run
// without the VMI CRD, installs it, starts the controller with only its
// ClusterRole, runs the tests and stops everything.
func run(m *testing.M) int {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	defer e.Stop()
	stop, err := setup(e)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the controller: %v\n", err)
		code = 1
	}
	return code
}

func setup(e *testenv.Env) (func() error, error) {
	ctx := context.Background()
	if err := gpuv1alpha1.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	var err error
	if k8s, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNamespace}}); err != nil {
		return nil, err
	}
	sa, err := serviceAccountConfig(ctx, e)
	if err != nil {
		return nil, err
	}
	metricsAddr, probeAddr = freeAddr(), freeAddr()
	o, err := app.ParseFlags([]string{"--namespace=" + platformNamespace,
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + probeAddr}, io.Discard)
	if err != nil {
		return nil, err
	}

	// Without the VMI CRD the controller must stop at once, with an error.
	early, cancelEarly := context.WithTimeout(ctx, time.Minute)
	noVMIsErr = app.RunWithConfig(early, sa, o, logr.Discard())
	cancelEarly()

	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{vmiCRD}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the VMI CRD: %w", err)
	}
	logFile = filepath.Join(e.Dir, "controller.log")
	logs, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctrl.SetLogger(log)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.RunWithConfig(runCtx, sa, o, log) }()
	stop := func() error {
		cancel()
		err := <-done
		_ = logs.Close()
		return err
	}
	// The controller writes the settings at start, before any class
	// exists.
	deadline := time.Now().Add(time.Minute)
	for {
		s := &gpuv1alpha1.GPUSettings{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: platformNamespace, Name: gpuv1alpha1.SettingsName}, s)
		if err == nil {
			initialSettings = s
			return stop, nil
		}
		select {
		case err := <-done:
			return nil, fmt.Errorf("the controller stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			_ = stop()
			return nil, fmt.Errorf("no settings after a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serviceAccountConfig returns the config of a user bound to the ClusterRole
// in config/rbac/role.yaml and to nothing else.
func serviceAccountConfig(ctx context.Context, e *testenv.Env) (*rest.Config, error) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: serviceAccount}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	u, err := e.Environment.AddUser(envtest.User{Name: serviceAccount}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
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

// showLogsOnFailure prints the end of the controller's logs when the test
// fails.
func showLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(logFile)
		if err != nil {
			t.Logf("controller logs: %v", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		t.Logf("last controller log lines:\n%s", strings.Join(lines, "\n"))
	})
}
