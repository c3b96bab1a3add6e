//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The environment every test of the package shares.
var (
	kube       kubernetes.Interface
	k8s        client.Client
	kubeconfig string
	coreBinary string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// run starts kube-apiserver and etcd with the CRDs, builds xila-guard-core,
// runs the tests and stops everything again.
func run(m *testing.M) (int, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run make integration, or point it at a directory with kube-apiserver, etcd and kubectl (make envtest)")
	}
	dir, err := os.MkdirTemp("", "xila-guard-scheduler-integration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)

	coreBinary = filepath.Join(dir, "xila-guard-core")
	goBin, err := exec.LookPath("go")
	if err != nil {
		return 0, fmt.Errorf("building xila-guard-core needs the go command on PATH: %w", err)
	}
	build := exec.Command(goBin, "build", "-o", coreBinary,
		"github.com/xila-guard/xila-guard/components/core/cmd/xila-guard-core")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building xila-guard-core: %w", err)
	}

	ctrllog.SetLogger(logr.Discard())
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return 0, err
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "api", "config", "crd")},
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
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, err
	}
	admin, err := env.AddUser(envtest.User{Name: "scheduler", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return 0, fmt.Errorf("adding the scheduler's user: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return 0, err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return 0, err
	}
	// The plugin reads these; the tests configure it through its args.
	for _, v := range []string{"XILAGUARD_CORE_URL", "XILAGUARD_ENFORCE_ACCEPT_MOCK", "XILAGUARD_EVAL_TIMEOUT_MS", "XILAGUARD_POOL_LABEL"} {
		os.Unsetenv(v)
	}
	schedmetrics.Register()
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), corev1.NamespaceDefault, metaGet); err != nil {
		return 0, fmt.Errorf("the test API server does not answer: %w", err)
	}
	return m.Run(), nil
}
