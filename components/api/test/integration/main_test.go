//go:build integration

package integration

import (
	"context"
	"os/exec"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/testenv"
)

// The test environment, shared by every test of the package.
var (
	k8s        client.Client
	kubeconfig string
	kubectl    string
	ctx        = context.Background()
)

// TestMain starts kube-apiserver and etcd with the CRDs installed, runs the
// tests, and stops them again.
func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (err error) {
		k8s, kubectl = e.Client, e.Kubectl()
		kubeconfig, err = e.Kubeconfig("admin", "system:masters")
		return err
	})
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
