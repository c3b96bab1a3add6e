//go:build integration

package charts

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/testenv"
)

// env is the API server the chart's admission policies are applied to.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) error {
		env = e
		return nil
	})
}

const poolKey = "guard.xila.us/tenant-pool"

// Principals, as the API server authenticates them.
var (
	nodeUser    = principal{"system:node:n1", []string{"system:nodes", "system:authenticated"}}
	otherNode   = principal{"system:node:n2", []string{"system:nodes", "system:authenticated"}}
	nfdMaster   = principal{"system:serviceaccount:node-feature-discovery:nfd-master", []string{"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "system:authenticated"}}
	fakeNFD     = principal{"system:serviceaccount:node-feature-discovery:nfd-master", []string{"system:nodes", "system:authenticated"}}
	operator    = principal{"ops-bob", []string{"node-operators", "system:authenticated"}}
	admin       = principal{"root", []string{"system:masters", "system:authenticated"}}
	taintKeeper = principal{"system:serviceaccount:xila-guard-system:xila-guard-observe", []string{"system:serviceaccounts", "system:authenticated"}}
)

func (p principal) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// applyTrustPolicies renders the chart with vals and creates its
// ValidatingAdmissionPolicies and bindings, replacing earlier ones, and
// waits until they refuse a node labelling itself into a pool of key.
func applyTrustPolicies(t *testing.T, vals map[string]any, key string) {
	t.Helper()
	ctx := t.Context()
	r := mustRender(t, loadChart(t), vals)
	var names []string
	for _, o := range objects(t, r.Manifest) {
		if o.Kind == "PolicyParameterSet" {
			recreate(t, &unstructured.Unstructured{Object: o.raw})
			continue
		}
		if o.Kind != "ValidatingAdmissionPolicy" && o.Kind != "ValidatingAdmissionPolicyBinding" {
			continue
		}
		if strings.HasPrefix(o.name(), "xila-guard-gpu-") {
			continue // TestIntegrationGPUDevicePolicies
		}
		recreate(t, &unstructured.Unstructured{Object: o.raw})
		if o.Kind == "ValidatingAdmissionPolicy" {
			names = append(names, o.name())
		}
	}
	if len(names) != 9 {
		t.Fatalf("the chart rendered the policies %v, want the pool membership, evidence label, compliance label, pool pod, attested evidence, bound evidence, reserved namespace, tenant namespace and service address policies", names)
	}
	// The policies take effect once the API server's policy informer has
	// them: a node labelling itself into a pool is refused from then on.
	createNode(t, "probe", nil, "")
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := patch{labels: map[string]any{key: "acme"}, taints: []corev1.Taint{{Key: key, Value: "acme", Effect: corev1.TaintEffectNoSchedule}}}
		last = p.apply(ctx, nodeUser.client(t), "probe")
		if last == nil {
			createNode(t, "probe", nil, "")
		}
		return last != nil && strings.Contains(last.Error(), "POOL_ADMIN_ONLY"), nil
	})
	if err != nil {
		t.Fatalf("the policies %v do not take effect: %v (last: %v)", names, err, last)
	}
	// The informer may add the other policies later than the first one.
	for _, probe := range []struct {
		labels map[string]any
		want   string
	}{
		{map[string]any{"nvidia.com/gpu.sharing-strategy": "none"}, "EVIDENCE_LABEL_NOT_ALLOWED"},
		{map[string]any{"compliance.guard.xila.us/probe": "true"}, "COMPLIANCE_LABEL_NOT_ALLOWED"},
	} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = patch{labels: probe.labels}.apply(ctx, nodeUser.client(t), "probe")
			if last == nil {
				createNode(t, "probe", nil, "")
			}
			return last != nil && strings.Contains(last.Error(), probe.want), nil
		})
		if err != nil {
			t.Fatalf("the policies %v do not take effect: %v (last: %v)", names, err, last)
		}
	}
}

// trustValues are the chart's values with the webhook, and the observe
// controller's taint manager, enabled.
func trustValues(t *testing.T) map[string]any {
	return map[string]any{
		"webhook": map[string]any{"enabled": true, "tls": map[string]any{"mode": "secret", "secretName": "s", "caBundle": testCA(t)}},
		"observe": map[string]any{"enabled": true},
	}
}

// grantNodeWrites lets every principal of the tests write nodes, as the
// Node authorizer lets a kubelet write its own: only the policies refuse.
func grantNodeWrites(t *testing.T) {
	t.Helper()
	grantGroups(t, "trust-test-node-writer", false,
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "create", "update", "patch"}}},
		"system:nodes", "system:serviceaccounts", "node-operators")
}

// grantGroups creates, or keeps, a ClusterRole of rules bound to groups;
// with cleanup, the test deletes both at its end.
func grantGroups(t *testing.T, name string, cleanup bool, rules []rbacv1.PolicyRule, groups ...string) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	var subjects []rbacv1.Subject
	for _, g := range groups {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subjects}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if cleanup {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
	}
}

// createNode creates a node as the administrator, with the given labels
// and pool taint value ("" for none).
func createNode(t *testing.T, name string, labels map[string]string, taint string) {
	t.Helper()
	recreate(t, nodeObject(name, labels, taint))
}

// recreate creates obj as the administrator, deleting an object of its
// name first and waiting until that one is gone.
func recreate(t *testing.T, obj client.Object) {
	t.Helper()
	_ = env.Client.Delete(t.Context(), obj.DeepCopyObject().(client.Object))
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Create(ctx, obj.DeepCopyObject().(client.Object))
		return !apierrors.IsAlreadyExists(err), err
	})
	if err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

func nodeObject(name string, labels map[string]string, taint string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if taint != "" {
		n.Spec.Taints = []corev1.Taint{{Key: poolKey, Value: taint, Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// patch is one node write: a JSON merge patch of nodes or nodes/status, or
// a node CREATE when create is set.
type patch struct {
	status bool
	create *corev1.Node
	labels map[string]any // nil values remove
	taints []corev1.Taint // nil leaves the taints alone
	clear  bool           // remove every taint
}

func (p patch) apply(ctx context.Context, c kubernetes.Interface, node string) error {
	if p.create != nil {
		_, err := c.CoreV1().Nodes().Create(ctx, p.create, metav1.CreateOptions{})
		return err
	}
	body := map[string]any{}
	if p.labels != nil {
		body["metadata"] = map[string]any{"labels": p.labels}
	}
	if p.taints != nil || p.clear {
		taints := p.taints
		if taints == nil {
			taints = []corev1.Taint{}
		}
		body["spec"] = map[string]any{"taints": taints}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var sub []string
	if p.status {
		sub = []string{"status"}
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{}, sub...)
	return err
}

func poolTaint(v string) []corev1.Taint {
	return []corev1.Taint{{Key: poolKey, Value: v, Effect: corev1.TaintEffectNoSchedule}}
}

// attempt is one write tried from one principal's seat.
type attempt struct {
	name string
	who  principal
	node string // the node written; reset before the attempt by setup
	// setup creates the node as it is before the attempt.
	setup func(t *testing.T)
	do    patch
	// want is "" for allowed, else a text the refusal contains.
	want string
}

// TestIntegrationTrustPolicies applies the chart's admission policies to a
// real API server and tries every way a principal other than a pool
// administrator or an evidence labeller could move a node into a pool or
// vouch for its evidence.
func TestIntegrationTrustPolicies(t *testing.T) {
	grantNodeWrites(t)
	// A node labelled into a pool without its taint, from before the
	// policies: it is kept working (ratchet) until the taint manager
	// taints it.
	createNode(t, "legacy", map[string]string{poolKey: "acme"}, "")
	applyTrustPolicies(t, trustValues(t), poolKey)
	plain := func(name string) func(t *testing.T) {
		return func(t *testing.T) { createNode(t, name, map[string]string{"kubernetes.io/hostname": name}, "") }
	}
	pooled := func(name, pool string) func(t *testing.T) {
		return func(t *testing.T) { createNode(t, name, map[string]string{poolKey: pool}, pool) }
	}
	// gpu is a pool node whose evidence NFD labelled.
	gpu := func(name string) func(t *testing.T) {
		return func(t *testing.T) {
			createNode(t, name, map[string]string{poolKey: "acme"}, "acme")
			evidence := patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "none", "feature.node.kubernetes.io/cpu-security.sgx.enabled": "true"}}
			if err := evidence.apply(t.Context(), nfdMaster.client(t), name); err != nil {
				t.Fatalf("NFD labelling node %s: %v", name, err)
			}
		}
	}
	admitted := ""
	adminOnly, taintMissing, labellerOnly := "POOL_ADMIN_ONLY", "POOL_TAINT_MISSING", "EVIDENCE_LABEL_NOT_ALLOWED"
	observeOnly := "COMPLIANCE_LABEL_NOT_ALLOWED"
	compliant := "compliance.guard.xila.us/acme-exclusive"
	// certified is a pool node the observe controller found compliant.
	certified := func(name string) func(t *testing.T) {
		return func(t *testing.T) {
			pooled(name, "acme")(t)
			if err := (patch{labels: map[string]any{compliant: "true"}}).apply(t.Context(), taintKeeper.client(t), name); err != nil {
				t.Fatalf("observe labelling node %s compliant: %v", name, err)
			}
		}
	}
	cases := []attempt{
		// Pool membership, from a node's own seat.
		{"G-POOL-LABEL node adds the pool label and taint to itself", nodeUser, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("acme")}, adminOnly},
		{"G-POOL-LABEL node adds the pool label through nodes/status", nodeUser, "n1", plain("n1"), patch{status: true, labels: map[string]any{poolKey: "acme"}}, adminOnly},
		{"G-POOL-LABEL node moves itself to another pool", nodeUser, "n1", pooled("n1", "acme"), patch{labels: map[string]any{poolKey: "beta"}, taints: poolTaint("beta")}, adminOnly},
		{"G-POOL-LABEL node moves itself to another pool through nodes/status", nodeUser, "n1", pooled("n1", "acme"), patch{status: true, labels: map[string]any{poolKey: "beta"}}, adminOnly},
		{"G-POOL-LABEL node leaves its pool", nodeUser, "n1", pooled("n1", "acme"), patch{labels: map[string]any{poolKey: nil}, clear: true}, adminOnly},
		{"G-POOL-LABEL node drops its pool taint", nodeUser, "n1", pooled("n1", "acme"), patch{clear: true}, adminOnly},
		{"G-POOL-LABEL node changes its pool taint's value", nodeUser, "n1", pooled("n1", "acme"), patch{taints: poolTaint("beta")}, adminOnly},
		{"G-POOL-LABEL node changes its pool taint's effect", nodeUser, "n1", pooled("n1", "acme"),
			patch{taints: []corev1.Taint{{Key: poolKey, Value: "acme", Effect: corev1.TaintEffectPreferNoSchedule}}}, adminOnly},
		{"G-POOL-LABEL node registers itself into a pool", nodeUser, "", nil, patch{create: nodeObject("n-new", map[string]string{poolKey: "acme"}, "acme")}, adminOnly},
		{"G-POOL-LABEL another node labels n1 into a pool", otherNode, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("acme")}, adminOnly},
		{"G-POOL-LABEL node heartbeat of a pool node", nodeUser, "n1", pooled("n1", "acme"), patch{status: true, labels: map[string]any{"example.com/zone": "a"}}, admitted},
		{"G-POOL-LABEL node changes an unrelated label of a pool node", nodeUser, "n1", pooled("n1", "acme"), patch{labels: map[string]any{"example.com/rack": "7"}}, admitted},
		{"G-POOL-LABEL node adds an unrelated taint to a pool node", nodeUser, "n1", pooled("n1", "acme"),
			patch{taints: append(poolTaint("acme"), corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})}, admitted},
		{"G-POOL-LABEL node registers without a pool", nodeUser, "", func(t *testing.T) {
			_ = env.Client.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-plain"}})
		},
			patch{create: nodeObject("n-plain", map[string]string{"kubernetes.io/hostname": "n-plain"}, "")}, admitted},
		// Pool membership, from other seats.
		{"G-POOL-LABEL operator with node rights labels a node into a pool", operator, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("acme")}, adminOnly},
		{"G-POOL-LABEL evidence labeller labels a node into a pool", nfdMaster, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("acme")}, adminOnly},
		{"G-POOL-LABEL administrator adds the pool label without its taint", admin, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}}, taintMissing},
		{"G-POOL-LABEL administrator adds the pool label with another pool's taint", admin, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("beta")}, taintMissing},
		{"G-POOL-LABEL administrator adds the pool label and its taint in one write", admin, "n1", plain("n1"), patch{labels: map[string]any{poolKey: "acme"}, taints: poolTaint("acme")}, admitted},
		{"G-POOL-LABEL administrator moves the label alone to another pool", admin, "n1", pooled("n1", "acme"), patch{labels: map[string]any{poolKey: "beta"}}, taintMissing},
		{"G-POOL-LABEL administrator moves label and taint to another pool", admin, "n1", pooled("n1", "acme"), patch{labels: map[string]any{poolKey: "beta"}, taints: poolTaint("beta")}, admitted},
		{"G-POOL-LABEL administrator drops the taint and keeps the label", admin, "n1", pooled("n1", "acme"), patch{clear: true}, taintMissing},
		{"G-POOL-LABEL administrator takes a node out of its pool", admin, "n1", pooled("n1", "acme"), patch{labels: map[string]any{poolKey: nil}, clear: true}, admitted},
		{"G-POOL-LABEL administrator creates a pool node without its taint", admin, "", func(t *testing.T) {
			_ = env.Client.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-admin"}})
		}, patch{create: nodeObject("n-admin", map[string]string{poolKey: "acme"}, "")}, taintMissing},
		{"G-POOL-LABEL node heartbeat of a pool node that predates the policy", nodeUser, "legacy", nil, patch{status: true, labels: map[string]any{"example.com/zone": "b"}}, admitted},
		{"G-POOL-LABEL taint manager taints a pool node that predates the policy", taintKeeper, "legacy", nil, patch{taints: poolTaint("acme")}, admitted},
		// Evidence labels.
		{"G-EVIDENCE-LABELS node labels its GPU exclusive", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": "H100"}}, labellerOnly},
		{"G-EVIDENCE-LABELS node hides its time-slicing", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": nil}}, labellerOnly},
		{"G-EVIDENCE-LABELS node changes its sharing through nodes/status", nodeUser, "g1", gpu("g1"), patch{status: true, labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "time-slicing"}}, labellerOnly},
		{"G-EVIDENCE-LABELS node claims a TEE", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"feature.node.kubernetes.io/cpu-security.tdx.enabled": "true"}}, labellerOnly},
		{"G-EVIDENCE-LABELS node drops a TEE label", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"feature.node.kubernetes.io/cpu-security.sgx.enabled": nil}}, labellerOnly},
		{"G-EVIDENCE-LABELS node writes mock evidence", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"guard.xila.us/mock-sharing-mode": "Exclusive"}}, labellerOnly},
		{"G-EVIDENCE-LABELS node registers with GPU labels", nodeUser, "", nil, patch{create: nodeObject("n-gpu", map[string]string{"nvidia.com/gpu.product": "H100"}, "")}, labellerOnly},
		{"G-EVIDENCE-LABELS account named like NFD but in group system:nodes", fakeNFD, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "mps"}}, labellerOnly},
		{"G-EVIDENCE-LABELS operator with node rights changes evidence", operator, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "mps"}}, labellerOnly},
		{"G-EVIDENCE-LABELS administrator changes evidence (not a labeller by default)", admin, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "mps"}}, labellerOnly},
		{"G-EVIDENCE-LABELS NFD master changes evidence", nfdMaster, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "H100"}}, admitted},
		{"G-EVIDENCE-LABELS NFD master removes evidence", nfdMaster, "g1", gpu("g1"), patch{labels: map[string]any{"feature.node.kubernetes.io/cpu-security.sgx.enabled": nil}}, admitted},
		{"G-EVIDENCE-LABELS node changes a label that is not evidence", nodeUser, "g1", gpu("g1"), patch{labels: map[string]any{"nvidia.com.example/other": "x"}}, admitted},
		// Compliance labels: what an external scheduler is steered by.
		{"G-COMPLIANCE-LABELS node declares itself compliant", nodeUser, "n1", pooled("n1", "acme"), patch{labels: map[string]any{compliant: "true"}}, observeOnly},
		{"G-COMPLIANCE-LABELS node declares itself compliant through nodes/status", nodeUser, "n1", pooled("n1", "acme"), patch{status: true, labels: map[string]any{compliant: "true"}}, observeOnly},
		{"G-COMPLIANCE-LABELS node registers as compliant", nodeUser, "", nil, patch{create: nodeObject("n-compliant", map[string]string{compliant: "true"}, "")}, observeOnly},
		{"G-COMPLIANCE-LABELS node removes its compliance label", nodeUser, "n1", certified("n1"), patch{labels: map[string]any{compliant: nil}}, observeOnly},
		{"G-COMPLIANCE-LABELS evidence labeller declares a node compliant", nfdMaster, "n1", pooled("n1", "acme"), patch{labels: map[string]any{compliant: "true"}}, observeOnly},
		{"G-COMPLIANCE-LABELS operator with node rights declares a node compliant", operator, "n1", pooled("n1", "acme"), patch{labels: map[string]any{compliant: "true"}}, observeOnly},
		{"G-COMPLIANCE-LABELS observe controller labels a node compliant", taintKeeper, "n1", pooled("n1", "acme"), patch{labels: map[string]any{compliant: "true"}}, admitted},
		{"G-COMPLIANCE-LABELS observe controller removes a compliance label", taintKeeper, "n1", certified("n1"), patch{labels: map[string]any{compliant: nil}}, admitted},
		{"G-COMPLIANCE-LABELS administrator removes a compliance label", admin, "n1", certified("n1"), patch{labels: map[string]any{compliant: nil}}, admitted},
		{"G-COMPLIANCE-LABELS node heartbeat of a compliant node", nodeUser, "n1", certified("n1"), patch{status: true, labels: map[string]any{"example.com/zone": "c"}}, admitted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			err := tc.do.apply(t.Context(), tc.who.client(t), tc.node)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: refused: %v", tc.who.user, err)
			case tc.want != "" && err == nil:
				t.Errorf("%s: allowed, want refused with %s", tc.who.user, tc.want)
			case tc.want != "" && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: refused with %v, want %s", tc.who.user, err, tc.want)
			}
		})
	}
	t.Run("G-POOL-LABEL a custom pool label gets the same protection", func(t *testing.T) {
		vals := trustValues(t)
		vals["enforcement"] = map[string]any{"scheduler": map[string]any{"poolLabel": "example.com/pool"}}
		applyTrustPolicies(t, vals, "example.com/pool")
		plain("n1")(t)
		custom := patch{labels: map[string]any{"example.com/pool": "acme"},
			taints: []corev1.Taint{{Key: "example.com/pool", Value: "acme", Effect: corev1.TaintEffectNoSchedule}}}
		if err := custom.apply(t.Context(), nodeUser.client(t), "n1"); err == nil || !strings.Contains(err.Error(), adminOnly) {
			t.Errorf("node adds the custom pool label: %v, want %s", err, adminOnly)
		}
		// The policy informer may still hold the parameters of the default
		// label for a moment after the node's refusal above: the node is
		// reset before each try, so an admitted try does not linger.
		awaitRefusal(t, "custom pool label's taint", taintMissing, func(ctx context.Context) error {
			plain("n1")(t)
			return (patch{labels: map[string]any{"example.com/pool": "acme"}}).apply(ctx, admin.client(t), "n1")
		})
		plain("n1")(t)
		if err := custom.apply(t.Context(), admin.client(t), "n1"); err != nil {
			t.Errorf("administrator adds the custom pool label and taint: %v", err)
		}
	})
}

// TestIntegrationBlastRadius applies the chart's webhook configurations
// with no webhook behind them (their Service does not exist, so every call
// fails) next to its admission policies, and counts what a webhook outage
// blocks: pods of a tenant's namespaces, pods that name a node, and
// bindings by anyone but the default scheduler outside the tenants; never
// an unrelated team's ordinary pods or the default scheduler's bindings,
// while the pool rules for those pods still hold in the API server.
func TestIntegrationBlastRadius(t *testing.T) {
	ctx := t.Context()
	// XG_BLAST_RADIUS_CHART measures another chart (e.g. an earlier
	// release's) the same way and only reports its count:
	// docs/benchmarks/webhook.md.
	other := os.Getenv("XG_BLAST_RADIUS_CHART")
	ch := loadChart(t)
	if other != "" {
		var err error
		if ch, err = loader.Load(other); err != nil {
			t.Fatal(err)
		}
	} else {
		grantNodeWrites(t) // applyTrustPolicies probes with a node's write
		applyTrustPolicies(t, trustValues(t), poolKey)
	}
	vals := trustValues(t)
	if other == "" {
		// The configurations as the install hook leaves them, armed
		// (failurePolicy Fail), with no webhook to answer.
		vals["webhook"].(map[string]any)["armAfterReady"] = false
	}
	r := mustRender(t, ch, vals)
	for _, o := range objects(t, r.Manifest) {
		if o.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		u := &unstructured.Unstructured{Object: o.raw}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s: %v", o, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}
	for _, ns := range []string{"team-web", "acme-ml"} {
		labels := map[string]string{}
		if ns == "acme-ml" {
			labels["guard.xila.us/tenant"] = "acme"
		}
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	createNode(t, "general-1", nil, "")
	pod := func(ns string, mods ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		for _, m := range mods {
			m(p)
		}
		return p
	}
	// The webhook configurations take effect once the API server has
	// them: a tenant's pod fails to reach the webhook from then on.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.client(t).CoreV1().Pods("acme-ml").Create(ctx, pod("acme-ml"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		t.Fatalf("the webhook configurations do not take effect: %v", err)
	}
	const n = 50
	admitted := 0
	var refusal error
	for range n {
		_, err := admin.client(t).CoreV1().Pods("team-web").Create(ctx, pod("team-web"), metav1.CreateOptions{})
		switch {
		case err == nil:
			admitted++
		case refusal == nil:
			refusal = err
			t.Logf("first refusal: %v", err)
		}
	}
	t.Logf("blast radius: with the webhook down, %d of %d ordinary pod CREATEs of an unrelated namespace were admitted", admitted, n)
	if other != "" {
		return
	}
	if admitted != n {
		t.Errorf("%d of %d ordinary pods of an unrelated namespace were refused while the webhook was down", n-admitted, n)
	}
	plain, err := admin.client(t).CoreV1().Pods("team-web").Create(ctx, pod("team-web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sched := principal{"system:kube-scheduler", []string{"system:authenticated"}}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trust-test-scheduler"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kube-scheduler"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: sched.user}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bind := func(who principal, p *corev1.Pod, node string) error {
		return who.client(t).CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	if err := bind(sched, plain, "general-1"); err != nil {
		t.Errorf("the default scheduler's binding of an unrelated pod was refused while the webhook was down: %v", err)
	}
	toleration := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: poolKey, Operator: corev1.TolerationOpExists}}
	}
	wildcard := func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	selector := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{poolKey: "acme"} }
	affinity := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: poolKey, Operator: corev1.NodeSelectorOpExists}}}}}}}
	}
	pinned := func(p *corev1.Pod) { p.Spec.NodeName = "general-1" }
	// The API server's policy informer adds each admission policy on its
	// own, after the webhook configurations: await the pool policies'
	// refusals before judging them.
	for want, mod := range map[string]func(*corev1.Pod){"POOL_TOLERATION": toleration, "POOL_SELECTOR": selector} {
		awaitRefusal(t, "pool", want, func(ctx context.Context) error {
			_, err := admin.client(t).CoreV1().Pods("team-web").Create(ctx, pod("team-web", mod), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"G-POOL-TOLERATIONS pool toleration outside the tenants", pod("team-web", toleration), "POOL_TOLERATION"},
		{"G-POOL-TOLERATIONS wildcard toleration outside the tenants", pod("team-web", wildcard), "POOL_TOLERATION"},
		{"G-POOL-TOLERATIONS pool nodeSelector outside the tenants", pod("team-web", selector), "POOL_SELECTOR"},
		{"G-POOL-TOLERATIONS pool affinity outside the tenants", pod("team-web", affinity), "POOL_SELECTOR"},
		{"a pod naming a node outside the tenants", pod("team-web", pinned), "failed calling webhook"},
		{"a tenant's pod", pod("acme-ml"), "failed calling webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := admin.client(t).CoreV1().Pods(tc.pod.Namespace).Create(ctx, tc.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with the webhook down: %v, want a refusal with %s", tc.name, err, tc.want)
			}
		})
	}
	binder := principal{"system:serviceaccount:volcano-system:volcano-scheduler", []string{"system:serviceaccounts", "system:authenticated"}}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trust-test-other-binder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kube-scheduler"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: binder.user}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	second, err := admin.client(t).CoreV1().Pods("team-web").Create(ctx, pod("team-web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(binder, second, "general-1"); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("another binder's binding with the webhook down: %v, want it refused (fail closed)", err)
	}
}

// grantPodWrites lets every principal of the bound-evidence test write
// pods, their status and bindings, as their roles (and the Node
// authorizer, for a kubelet) would: only the policy refuses.
func grantPodWrites(t *testing.T) {
	t.Helper()
	grantGroups(t, "trust-test-pod-writer", false,
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "pods/binding", "bindings"}, Verbs: []string{"get", "create", "update", "patch"}}},
		"system:nodes", "system:serviceaccounts", "acme-developers")
}

// TestIntegrationBoundEvidence applies the chart's admission policies to a
// real API server and tries to forge, change or erase the record of the
// evidence a pod was bound against from a tenant's seat and from a
// node's (envtest runs without NodeRestriction: the policy alone
// refuses), while the controlled scheduler's account writes it.
func TestIntegrationBoundEvidence(t *testing.T) {
	ctx := t.Context()
	grantNodeWrites(t) // applyTrustPolicies probes with a node's write
	grantPodWrites(t)
	applyTrustPolicies(t, trustValues(t), poolKey)
	t.Cleanup(func() { removeTrustPolicies(t) })
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evidenceNS,
		Labels: map[string]string{"guard.xila.us/tenant": "acme"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const refused = "BOUND_EVIDENCE_RESERVED"
	key := guard.AnnotationBoundEvidence
	newPod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: evidenceNS, Annotations: annotations},
			Spec: corev1.PodSpec{SchedulerName: "xila-guard-scheduler", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	// The API server loads the policies in the background: wait until
	// this one refuses a tenant's forged record.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = tenantUser.client(t).CoreV1().Pods(evidenceNS).Create(ctx, newPod("probe", map[string]string{key: recordA}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), refused), nil
	})
	if err != nil {
		t.Fatalf("the bound evidence policy does not take effect: %v (last: %v)", err, last)
	}
	// fresh is the pod as the scheduler left it: bound, with record (""
	// for none).
	fresh := func(t *testing.T, record string) *corev1.Pod {
		t.Helper()
		_ = env.Client.Delete(t.Context(), newPod("train", nil), client.GracePeriodSeconds(0))
		var p *corev1.Pod
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			p, err = admin.client(t).CoreV1().Pods(evidenceNS).Create(ctx, newPod("train", map[string]string{"team": "vision"}), metav1.CreateOptions{})
			return !apierrors.IsAlreadyExists(err), err
		})
		if err != nil {
			t.Fatalf("creating pod train: %v", err)
		}
		if record != "" {
			if err := bindWithRecord(t, schedulerSA, p, record); err != nil {
				t.Fatalf("the scheduler binding with record %s: %v", record, err)
			}
		}
		return p
	}
	b := recordB
	cases := []struct {
		name   string
		who    principal
		before string // the record the pod has first, "" for none
		do     func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error
		want   string // "" for admitted
		after  string // the record afterwards, when admitted
	}{
		{"tenant creates a pod with a forged record", tenantUser, "", func(t *testing.T, c kubernetes.Interface, _ *corev1.Pod) error {
			_, err := c.CoreV1().Pods(evidenceNS).Create(t.Context(), newPod("forged", map[string]string{key: recordA}), metav1.CreateOptions{})
			return err
		}, refused, ""},
		{"tenant adds a record", tenantUser, "", recordBy(&b, ""), refused, ""},
		{"tenant changes the record", tenantUser, recordA, recordBy(&b, ""), refused, recordA},
		{"tenant removes the record", tenantUser, recordA, recordBy(nil, ""), refused, recordA},
		{"tenant replaces the pod's annotations, dropping the record", tenantUser, recordA, func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
			got, err := c.CoreV1().Pods(evidenceNS).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Annotations = map[string]string{"team": "nlp"}
			_, err = c.CoreV1().Pods(evidenceNS).Update(t.Context(), got, metav1.UpdateOptions{})
			return err
		}, refused, recordA},
		{"tenant updates another annotation", tenantUser, recordA, func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
			_, err := c.CoreV1().Pods(evidenceNS).Patch(t.Context(), p.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"team":"nlp"}}}`), metav1.PatchOptions{})
			return err
		}, "", recordA},
		{"kubelet changes the record through pods/status", kubelet, recordA, recordBy(&b, "status"), refused, recordA},
		{"kubelet adds a record through pods/status", kubelet, "", recordBy(&b, "status"), refused, ""},
		{"kubelet removes the record through pods/status", kubelet, recordA, recordBy(nil, "status"), refused, recordA},
		{"kubelet changes the record through pods", kubelet, recordA, recordBy(&b, ""), refused, recordA},
		{"kubelet's status update that keeps the record", kubelet, recordA, func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
			_, err := c.CoreV1().Pods(evidenceNS).Patch(t.Context(), p.Name, types.MergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}, "", recordA},
		{"the scheduler's account name in group system:nodes", nodeAsScheduler, "", recordBy(&b, ""), refused, ""},
		{"a binder binds with a forged record", principal{"system:serviceaccount:volcano-system:volcano-scheduler", []string{"system:serviceaccounts", "system:authenticated"}}, "",
			func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
				return c.CoreV1().Pods(evidenceNS).Bind(t.Context(), &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: evidenceNS, UID: p.UID, Annotations: map[string]string{key: recordA}},
					Target:     corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
			}, refused, ""},
		{"an administrator changes the record", admin, recordA, recordBy(&b, ""), refused, recordA},
		{"the scheduler binds with the record", schedulerSA, "", func(t *testing.T, _ kubernetes.Interface, p *corev1.Pod) error {
			return bindWithRecord(t, schedulerSA, p, recordB)
		}, "", recordB},
		{"the scheduler binds without a record", schedulerSA, "", func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
			return c.CoreV1().Pods(evidenceNS).Bind(t.Context(), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: evidenceNS, UID: p.UID},
				Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
		}, "", ""},
		// The record travels only on a binding: a stolen scheduler token
		// cannot re-stamp a bound pod after its node changed.
		{"the scheduler adds a record to a pod", schedulerSA, "", recordBy(&b, ""), refused, ""},
		{"the scheduler re-stamps a bound pod's record", schedulerSA, recordA, recordBy(&b, ""), refused, recordA},
		{"the scheduler removes a bound pod's record", schedulerSA, recordA, recordBy(nil, ""), refused, recordA},
		{"the scheduler changes the record through pods/status", schedulerSA, recordA, recordBy(&b, "status"), refused, recordA},
	}
	for _, tc := range cases {
		t.Run("G-BOUND-EVIDENCE "+tc.name, func(t *testing.T) {
			p := fresh(t, tc.before)
			err := tc.do(t, tc.who.client(t), p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: refused: %v", tc.who.user, err)
			case tc.want != "" && err == nil:
				t.Errorf("%s: allowed, want refused with %s", tc.who.user, tc.want)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.who.user)):
				t.Errorf("%s: refused with %v, want %s naming the user", tc.who.user, err, tc.want)
			}
			got := &corev1.Pod{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: evidenceNS, Name: p.Name}, got); err != nil {
				t.Fatal(err)
			}
			if v := got.Annotations[key]; v != tc.after {
				t.Errorf("the record is %q afterwards, want %q", v, tc.after)
			}
		})
	}
}

// recordBy writes the pod's record (nil removes it) as the scheduler
// does, through sub ("" or "status").
func recordBy(record *string, sub string) func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
	return func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) error {
		return patchRecord(t.Context(), c, p.UID, record, sub)
	}
}

// bindWithRecord binds the pod to node n1 as who, with the record on the
// Binding, as the controlled scheduler binds.
func bindWithRecord(t *testing.T, who principal, p *corev1.Pod, record string) error {
	return who.client(t).CoreV1().Pods(p.Namespace).Bind(t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Annotations: map[string]string{guard.AnnotationBoundEvidence: record}},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
}

// patchRecord is the plugin's JSON merge patch of pod train's record,
// with its UID as precondition.
func patchRecord(ctx context.Context, c kubernetes.Interface, uid types.UID, record *string, sub string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid,
		"annotations": map[string]*string{guard.AnnotationBoundEvidence: record}}})
	if err != nil {
		return err
	}
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err = c.CoreV1().Pods(evidenceNS).Patch(ctx, "train", types.MergePatchType, body, metav1.PatchOptions{}, subs...)
	return err
}
