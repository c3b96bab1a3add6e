//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/app"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/status"
)

// TestIntegrationRun starts the whole controller as a user that holds only
// the generated ClusterRole, with leader election, and checks that it
// publishes evidence, taints the pool node and answers its probes.
func TestIntegrationRun(t *testing.T) {
	ctx := context.Background()
	sa := serviceAccountConfig(t)
	o, err := app.ParseFlags([]string{"--core-url=in-process", "--leader-election-namespace=default",
		"--metrics-bind-address=127.0.0.1:19090", "--health-probe-bind-address=127.0.0.1:19091"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunWithConfig(runCtx, sa, o, io.Discard, logr.Discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	createNode(t, "run-1", map[string]string{guard.LabelTenantPool: "acme", evidence.LabelGPUCount: "1", evidence.LabelSharingStrategy: "none"}, "b")
	eventually(t, 20*time.Second, func() error {
		if _, err := getState("run-1"); err != nil {
			return err
		}
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "run-1"}, n); err != nil {
			return err
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == guard.TaintTenantPool && t.Value == "acme" }) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	// The status controller writes through the generated role.
	create(t, fixture.MakePlacementPolicy("run-policy", v1alpha1.SourceNFD).Obj())
	eventually(t, 20*time.Second, func() error {
		p := &v1alpha1.PlacementPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "run-policy"}, p); err != nil {
			return err
		}
		return wantReady(p.Status.Conditions, metav1.ConditionFalse, status.ReasonUnreferenced)
	})
	for _, url := range []string{"http://127.0.0.1:19091/healthz", "http://127.0.0.1:19091/readyz", "http://127.0.0.1:19090/metrics"} {
		eventually(t, 5*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		})
	}
}

// serviceAccountConfig returns the config of a user bound to the ClusterRole
// in config/rbac/role.yaml and to nothing else.
func serviceAccountConfig(t *testing.T) *rest.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	const user = "system:serviceaccount:xila-guard-system:xila-guard-observe"
	create(t, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
	u, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}
