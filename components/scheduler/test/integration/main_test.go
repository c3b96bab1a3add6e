//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
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
)

func TestMain(m *testing.M) {
	testenv.Main(m, setup)
}

// setup connects to the API server that testenv started with the CRDs.
func setup(e *testenv.Env) error {
	ctrllog.SetLogger(logr.Discard())
	k8s = e.Client
	var err error
	if kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return err
	}
	if kubeconfig, err = e.Kubeconfig("scheduler", "system:masters"); err != nil {
		return err
	}
	// The plugin reads these; the tests configure it through its args.
	for _, v := range []string{"XILAGUARD_ENFORCE_ACCEPT_MOCK", "XILAGUARD_POOL_LABEL"} {
		os.Unsetenv(v)
	}
	schedmetrics.Register()
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), corev1.NamespaceDefault, metaGet); err != nil {
		return fmt.Errorf("the test API server does not answer: %w", err)
	}
	return nil
}
