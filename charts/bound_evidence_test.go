package charts

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Fixtures of the bound-evidence policy's tests.
const (
	boundEvidencePolicy = "xila-guard-bound-evidence"
	evidenceNS          = "acme-ml"
	recordA             = "uid-n1/boot-1"
	recordB             = "uid-n2/boot-7"
)

var (
	schedulerSA = principal{"system:serviceaccount:" + releaseNS + ":xila-guard-scheduler",
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS, "system:authenticated"}}
	tenantUser  = principal{"alice", []string{"acme-developers", "system:authenticated"}}
	kubelet     = principal{"system:node:n1", []string{"system:nodes", "system:authenticated"}}
	rsCtrl      = principal{"system:serviceaccount:kube-system:replicaset-controller", []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	clusterRoot = principal{"root", []string{"system:masters", "system:authenticated"}}
	// nodeAsScheduler is the scheduler's name in group system:nodes: a
	// node's credentials never write the record, whatever the name says.
	nodeAsScheduler = principal{schedulerSA.user, []string{"system:nodes", "system:authenticated"}}

	gvrBinding = schema.GroupVersionResource{Version: "v1", Resource: "bindings"}
)

// principal is a user as the API server authenticates it.
type principal struct {
	user   string
	groups []string
}

// recordedPod is a pod of the tenant, its annotations the given ones
// (nil for none), bound to n1 when bound is set.
func recordedPod(annotations map[string]any, bound bool) map[string]any {
	m := map[string]any{"name": "train", "namespace": evidenceNS}
	if annotations != nil {
		m["annotations"] = annotations
	}
	spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.example/train:1"}}}
	if bound {
		spec["nodeName"] = "n1"
	}
	return kobj("v1", "Pod", m, spec)
}

func withRecord(v string, others ...string) map[string]any {
	a := map[string]any{guard.AnnotationBoundEvidence: v}
	for i := 0; i+1 < len(others); i += 2 {
		a[others[i]] = others[i+1]
	}
	return a
}

// binding is a Binding of the pod to n1 with the given annotations, which
// the API server copies onto the pod.
func binding(annotations map[string]any) map[string]any {
	m := map[string]any{"name": "train", "namespace": evidenceNS}
	if annotations != nil {
		m["annotations"] = annotations
	}
	return map[string]any{"apiVersion": "v1", "kind": "Binding", "metadata": m,
		"target": map[string]any{"apiVersion": "v1", "kind": "Node", "name": "n1"}}
}

// boundEvidenceCase is one request to the policy; want is "" to admit,
// else a text the refusal contains (it always starts with the reason).
type boundEvidenceCase struct {
	name string
	who  principal
	op   admission.Operation
	gvr  schema.GroupVersionResource
	sub  string
	obj  map[string]any
	old  map[string]any
	want string
}

var boundEvidenceCases = []boundEvidenceCase{
	// Creating a pod with the record.
	{"tenant creates a pod with the record", tenantUser, admission.Create, gvrPod, "", recordedPod(withRecord(recordA), false), nil, "alice may not add the annotation guard.xila.us/bound-evidence of pod acme-ml/train (pods)"},
	{"a controller creates a pod from a template with the record", rsCtrl, admission.Create, gvrPod, "", recordedPod(withRecord(recordA), false), nil, "replicaset-controller may not add"},
	{"a cluster administrator creates a pod with the record", clusterRoot, admission.Create, gvrPod, "", recordedPod(withRecord(recordA), false), nil, "root may not add"},
	{"an empty record counts", tenantUser, admission.Create, gvrPod, "", recordedPod(withRecord(""), false), nil, "may not add"},
	{"tenant creates a pod without it", tenantUser, admission.Create, gvrPod, "", recordedPod(map[string]any{"team": "vision"}, false), nil, ""},
	{"tenant creates a pod without annotations", tenantUser, admission.Create, gvrPod, "", recordedPod(nil, false), nil, ""},
	// Updating a pod.
	{"tenant adds the record", tenantUser, admission.Update, gvrPod, "", recordedPod(withRecord(recordA), false), recordedPod(nil, false), "may not add"},
	{"tenant changes the record", tenantUser, admission.Update, gvrPod, "", recordedPod(withRecord(recordB), true), recordedPod(withRecord(recordA), true), "alice may not change"},
	{"tenant removes the record", tenantUser, admission.Update, gvrPod, "", recordedPod(nil, true), recordedPod(withRecord(recordA), true), "alice may not remove"},
	{"tenant removes the record with its other annotations kept", tenantUser, admission.Update, gvrPod, "", recordedPod(map[string]any{"team": "vision"}, true), recordedPod(withRecord(recordA, "team", "vision"), true), "may not remove"},
	{"tenant updates other annotations, keeping the record", tenantUser, admission.Update, gvrPod, "", recordedPod(withRecord(recordA, "team", "nlp"), true), recordedPod(withRecord(recordA, "team", "vision"), true), ""},
	{"tenant updates a pod that has no record", tenantUser, admission.Update, gvrPod, "", recordedPod(map[string]any{"team": "nlp"}, false), recordedPod(nil, false), ""},
	// The controlled scheduler.
	{"the scheduler records the evidence with its binding", schedulerSA, admission.Create, gvrPod, "binding", binding(withRecord(recordA)), nil, ""},
	{"the scheduler records through the bindings resource", schedulerSA, admission.Create, gvrBinding, "", binding(withRecord(recordA)), nil, ""},
	{"the scheduler adds the record to a pod", schedulerSA, admission.Update, gvrPod, "", recordedPod(withRecord(recordA), false), recordedPod(nil, false), "may not add"},
	{"the scheduler re-stamps a bound pod's record", schedulerSA, admission.Update, gvrPod, "", recordedPod(withRecord(recordB), true), recordedPod(withRecord(recordA), true), "may not change"},
	{"the scheduler removes a record", schedulerSA, admission.Update, gvrPod, "", recordedPod(nil, true), recordedPod(withRecord(recordA), true), "may not remove"},
	{"the scheduler changes a record through pods/status", schedulerSA, admission.Update, gvrPod, "status", recordedPod(withRecord(recordB), true), recordedPod(withRecord(recordA), true), "may not change"},
	{"the scheduler's name in group system:nodes binds with a record", nodeAsScheduler, admission.Create, gvrPod, "binding", binding(withRecord(recordA)), nil, "may not add"},
	// Kubelets, through pods/status.
	{"kubelet changes the record through pods/status", kubelet, admission.Update, gvrPod, "status", recordedPod(withRecord(recordB), true), recordedPod(withRecord(recordA), true), "system:node:n1 may not change the annotation guard.xila.us/bound-evidence of pod acme-ml/train (pods/status)"},
	{"kubelet adds a record through pods/status", kubelet, admission.Update, gvrPod, "status", recordedPod(withRecord(recordA), true), recordedPod(nil, true), "may not add"},
	{"kubelet removes the record through pods/status", kubelet, admission.Update, gvrPod, "status", recordedPod(nil, true), recordedPod(withRecord(recordA), true), "may not remove"},
	{"kubelet's status update keeps the record", kubelet, admission.Update, gvrPod, "status", recordedPod(withRecord(recordA, "team", "vision"), true), recordedPod(withRecord(recordA), true), ""},
	// Bindings, whose annotations the API server copies onto the pod.
	{"another binder binds with the record", principal{"system:serviceaccount:volcano-system:volcano-scheduler", []string{"system:serviceaccounts"}}, admission.Create, gvrPod, "binding", binding(withRecord(recordA)), nil, "volcano-scheduler may not add the annotation guard.xila.us/bound-evidence of pod acme-ml/train (pods/binding)"},
	{"a binding through the bindings resource", tenantUser, admission.Create, gvrBinding, "", binding(withRecord(recordA)), nil, "(bindings)"},
	{"another binder binds without it", principal{"system:kube-scheduler", nil}, admission.Create, gvrPod, "binding", binding(nil), nil, ""},
	{"the scheduler binds", schedulerSA, admission.Create, gvrPod, "binding", binding(nil), nil, ""},
}

// TestBoundEvidencePolicy evaluates the policy, as rendered by the chart,
// on the requests above, compiled in the CEL environment of each
// supported Kubernetes minor, with the user of every refusal named.
func TestBoundEvidencePolicy(t *testing.T) {
	t.Run("G-BOUND-EVIDENCE only the scheduler's account writes the record", testBoundEvidencePolicy)
}

func testBoundEvidencePolicy(t *testing.T) {
	p, ok := renderedPolicies(t, withTestCA(t, readValues(t, "enforcement")))[boundEvidencePolicy]
	if !ok {
		t.Fatalf("the chart renders no policy %s", boundEvidencePolicy)
	}
	rules := p.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || strings.Join(rules[0].Resources, ",") != "pods,pods/status,pods/binding,bindings" ||
		strings.Join(opStrings(rules[0].Operations), ",") != "CREATE,UPDATE" || p.Spec.MatchConstraints.NamespaceSelector != nil {
		t.Errorf("%s matches %+v, want CREATE and UPDATE of pods, pods/status, pods/binding and bindings in every namespace", boundEvidencePolicy, p.Spec.MatchConstraints)
	}
	for _, v := range celVersions {
		c := compilePolicy(t, v, p)
		for _, tc := range boundEvidenceCases {
			got := c.evaluate(t, request{op: tc.op, gvr: tc.gvr, subresource: tc.sub, namespace: evidenceNS,
				object: tc.obj, old: tc.old, user: tc.who.user, groups: tc.who.groups})
			switch {
			case tc.want == "" && got != "":
				t.Errorf("%s %s: refused: %s", v, tc.name, got)
			case tc.want != "" && !strings.HasPrefix(got, string(guard.ReasonBoundEvidenceReserved)+": "):
				t.Errorf("%s %s: want a refusal starting %s, got %q", v, tc.name, guard.ReasonBoundEvidenceReserved, got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("%s %s: refusal %q does not contain %q", v, tc.name, got, tc.want)
			case tc.want != "" && !strings.Contains(got, schedulerSA.user):
				t.Errorf("%s %s: refusal %q does not name the scheduler's account", v, tc.name, got)
			}
		}
	}
}

// TestBoundEvidencePolicyTypeCheck compiles every expression of the
// policy typed against the Pod schema, and untyped as for bindings, in
// the environment of each supported Kubernetes minor, as the API
// server's type checker does.
func TestBoundEvidencePolicyTypeCheck(t *testing.T) {
	all := policySchemas(t)
	p := renderedPolicies(t, withTestCA(t, readValues(t, "enforcement")))[boundEvidencePolicy]
	if p.ValidatingAdmissionPolicy == nil {
		t.Fatalf("the chart renders no policy %s", boundEvidencePolicy)
	}
	kinds := append(matched(p.ValidatingAdmissionPolicy, all), kindSchema{})
	if len(kinds) != 2 {
		t.Fatalf("%s: %d kinds with a schema, want Pod", boundEvidencePolicy, len(kinds)-1)
	}
	for _, v := range celVersions {
		for _, k := range kinds {
			for _, pr := range typeCheck(t, v, p.ValidatingAdmissionPolicy, k.schema, nil) {
				t.Errorf("%s on %q, Kubernetes %s: %s", boundEvidencePolicy, k.gvk.Kind, v, pr)
			}
		}
	}
}

// TestBoundEvidencePolicyRendersWithTheTrustPolicies: the policy comes and
// goes with the other trust policies (webhook.enabled), names the
// release's scheduler account, and the scheduler's role writes no pod.
func TestBoundEvidencePolicyRendersWithTheTrustPolicies(t *testing.T) {
	for _, values := range []string{"default", "enforcement-only", "observe"} {
		if _, ok := renderedPolicies(t, readValues(t, values))[boundEvidencePolicy]; ok {
			t.Errorf("values %s (no webhook): %s rendered", values, boundEvidencePolicy)
		}
	}
	vals := withTestCA(t, readValues(t, "enforcement"))
	policies := renderedPolicies(t, vals)
	if _, ok := policies["xila-guard-attested-evidence"]; !ok {
		t.Fatal("the trust policies are not rendered with the webhook")
	}
	if got := field(policies[boundEvidencePolicy].parameters, "spec", "scheduler"); got != schedulerSA.user {
		t.Errorf("the policy's parameters name the scheduler %v, want %s", got, schedulerSA.user)
	}
	role := find(t, objects(t, mustRender(t, loadChart(t), vals).Manifest), "ClusterRole", "xila-guard-scheduler")
	rules, _ := field(role.raw, "rules").([]any)
	// The record travels on the Binding: the scheduler writes no pod.
	for _, r := range rules {
		m, _ := r.(map[string]any)
		if slices.Contains(anyStrings(m["apiGroups"]), "") && slices.Contains(anyStrings(m["resources"]), "pods") &&
			slices.ContainsFunc(anyStrings(m["verbs"]), func(v string) bool { return v == "patch" || v == "update" || v == "*" }) {
			t.Errorf("ClusterRole xila-guard-scheduler may write pods: %v", m)
		}
	}
}

func opStrings[T ~string](ops []T) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// TestBoundEvidencePolicyRecordBinders: with orchestrator integrations, the
// bindings of an enforcing integration's binder may carry the record (the
// webhook writes it, and its judgement refuses any other than the target
// node's evidence), and nothing else of theirs may; a report-only
// integration's binder may not.
func TestBoundEvidencePolicyRecordBinders(t *testing.T) {
	t.Run("G-BOUND-EVIDENCE an enforcing integration's binder brings the record on its bindings only", testBoundEvidencePolicyRecordBinders)
}

func testBoundEvidencePolicyRecordBinders(t *testing.T) {
	p, ok := renderedPolicies(t, withTestCA(t, readValues(t, "enforcement-integrations")))[boundEvidencePolicy]
	if !ok {
		t.Fatalf("the chart renders no policy %s", boundEvidencePolicy)
	}
	volcano := principal{"system:serviceaccount:volcano-system:volcano-scheduler", []string{"system:serviceaccounts", "system:authenticated"}}
	runai := principal{"system:serviceaccount:runai:runai-scheduler", []string{"system:serviceaccounts", "system:authenticated"}}
	for _, v := range celVersions {
		c := compilePolicy(t, v, p)
		for _, tc := range []struct {
			name string
			who  principal
			gvr  schema.GroupVersionResource
			sub  string
			obj  map[string]any
			old  map[string]any
			op   admission.Operation
			want bool
		}{
			{"Volcano's binding carries the record", volcano, gvrPod, "binding", binding(withRecord(recordA)), nil, admission.Create, true},
			{"Volcano's binding through the bindings resource", volcano, gvrBinding, "", binding(withRecord(recordA)), nil, admission.Create, true},
			{"Volcano writes the record on a pod", volcano, gvrPod, "", recordedPod(withRecord(recordA), false), recordedPod(nil, false), admission.Update, false},
			{"a report-only binder's binding carries the record", runai, gvrPod, "binding", binding(withRecord(recordA)), nil, admission.Create, false},
			{"Volcano's name in group system:nodes", principal{volcano.user, []string{"system:nodes"}}, gvrPod, "binding", binding(withRecord(recordA)), nil, admission.Create, false},
		} {
			got := c.evaluate(t, request{op: tc.op, gvr: tc.gvr, subresource: tc.sub, namespace: evidenceNS,
				object: tc.obj, old: tc.old, user: tc.who.user, groups: tc.who.groups})
			if (got == "") != tc.want {
				t.Errorf("%s %s: got %q, want allowed=%v", v, tc.name, got, tc.want)
			}
		}
	}
}
