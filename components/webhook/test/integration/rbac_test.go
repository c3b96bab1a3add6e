//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TestIntegrationWithoutPolicyRBAC runs the webhook as a user that may read
// everything it watches but PlacementPolicies: it becomes ready, judges
// other pods, and refuses protected pods rather than guess their policy.
func TestIntegrationWithoutPolicyRBAC(t *testing.T) {
	ctx := t.Context()
	const group = "xila-guard-webhook-limited"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: group},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{guard.GroupName}, Resources: []string{"tenantbindings", "nodesecuritystates"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: group},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: group},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user, err := testEnv.AddUser(envtest.User{Name: "limited-webhook", Groups: []string{group}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	limited := filepath.Join(tempDir, "limited-kubeconfig")
	if err := os.WriteFile(limited, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{"xila-guard-test": "rbac"}
	for _, ns := range []*corev1.Namespace{
		fixture.MakeNamespace("acme-rbac").Label("xila-guard-test", "rbac").Tenant("acme").Obj(),
		fixture.MakeNamespace("web-rbac").Label("xila-guard-test", "rbac").Obj(),
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w := startWebhook(t, "--kubeconfig="+limited)
	register(t, "rbac", w, &metav1.LabelSelector{MatchLabels: sel}, false)
	waitEnforced(t, "acme-rbac")

	_, err = kube.CoreV1().Pods("acme-rbac").Create(ctx, pod("acme-rbac").Obj(), metav1.CreateOptions{})
	expect(t, "protected pod without PlacementPolicies", err, guard.ReasonLookupFailed)
	if err != nil && !strings.Contains(err.Error(), "placementpolicies") {
		t.Errorf("the refusal does not say what is missing: %v", err)
	}
	_, err = kube.CoreV1().Pods("web-rbac").Create(ctx, pod("web-rbac").Obj(), metav1.CreateOptions{})
	expect(t, "plain pod", err, "")
	_, err = kube.CoreV1().Pods("web-rbac").Create(ctx, pod("web-rbac").NodeName(poolNode).Obj(), metav1.CreateOptions{})
	expect(t, "plain pod pinned to a pool node", err, guard.ReasonPoolNodeName)
}
