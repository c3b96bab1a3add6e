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
	"k8s.io/client-go/kubernetes"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/xila-guard/xila-guard/components/api/testenv"
)

// The environment every test of the package shares.
var (
	kube       kubernetes.Interface
	k8s        client.Client
	kubeconfig string
	coreBinary string
)

func TestMain(m *testing.M) {
	testenv.Main(m, setup)
}

// setup builds xila-guard-core and connects to the API server that testenv
// started with the CRDs.
func setup(e *testenv.Env) error {
	coreBinary = filepath.Join(e.Dir, "xila-guard-core")
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building xila-guard-core needs the go command on PATH: %w", err)
	}
	build := exec.Command(goBin, "build", "-o", coreBinary,
		"github.com/xila-guard/xila-guard/components/core/cmd/xila-guard-core")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building xila-guard-core: %w", err)
	}
	ctrllog.SetLogger(logr.Discard())
	k8s = e.Client
	if kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return err
	}
	if kubeconfig, err = e.Kubeconfig("scheduler", "system:masters"); err != nil {
		return err
	}
	// The plugin reads these; the tests configure it through its args.
	for _, v := range []string{"XILAGUARD_CORE_URL", "XILAGUARD_ENFORCE_ACCEPT_MOCK", "XILAGUARD_EVAL_TIMEOUT_MS", "XILAGUARD_POOL_LABEL"} {
		os.Unsetenv(v)
	}
	schedmetrics.Register()
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), corev1.NamespaceDefault, metaGet); err != nil {
		return fmt.Errorf("the test API server does not answer: %w", err)
	}
	return nil
}
