package plugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// run runs the plugin with args and returns its output and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err != nil && ExitCode(err) == ExitError {
		out.WriteString("error: " + err.Error() + "\n")
	}
	return out.String(), ExitCode(err)
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const now = "2026-03-01T12:05:00Z"

func TestOfflineTest(t *testing.T) {
	policy, evidence := "testdata/policy.yaml", "testdata/evidence.yaml"
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"one node refused fails an expected allow", []string{"--policy", policy, "--evidence", evidence, "--now", now}, ExitFailed,
			[]string{"gpu-1  acme  allow", "gpu-2  acme  deny      TIME_SLICING_FORBIDDEN", "allow TimeSlicing in policy acme-exclusive's gpuSharing", "FAIL: 1 of 2"}},
		{"stale evidence at the current time", []string{"--policy", policy, "--evidence", evidence}, ExitFailed,
			[]string{"indeterminate  EVIDENCE_STALE", "raise policy acme-exclusive's spec.evidence.maxAge"}},
		{"the pod of another namespace is no tenant's", []string{"--policy", policy, "--evidence", evidence, "--now", now,
			"--pod", write(t, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec: {containers: [{name: c, image: i}]}\n")},
			ExitFailed, []string{"TENANT_UNRESOLVED"}},
		{"the tenant given instead of a binding", []string{"--policy", write(t, "p.yaml", "apiVersion: guard.xila.us/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: open}\nspec: {evidence: {acceptedSources: [nfd]}}\n"),
			"--evidence", evidence, "--now", now, "--tenant", "acme"}, ExitOK, []string{"PASS: 2 node(s) allow"}},
		{"another tenant's evidence", []string{"--policy", write(t, "p.yaml", "apiVersion: guard.xila.us/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: open}\nspec: {evidence: {acceptedSources: [nfd]}}\n"),
			"--evidence", evidence, "--now", now, "--tenant", "globex", "--expect", "deny"}, ExitOK, []string{"TENANT_MISMATCH", "PASS: 2 node(s) deny"}},
		{"lab evidence refused by production", []string{"--policy", policy, "--evidence", write(t, "mock.yaml", strings.ReplaceAll(mustRead(t, evidence), "source: nfd", "source: mock")),
			"--now", now, "--expect", "indeterminate"}, ExitOK, []string{"SOURCE_NOT_ACCEPTED"}},
		{"unknown field", []string{"--policy", write(t, "p.yaml", "apiVersion: guard.xila.us/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\nspec: {evidence: {acceptedSources: [nfd]}, gpuSharingg: {}}\n"),
			"--evidence", evidence, "--tenant", "acme"}, ExitError, []string{`unknown field "gpuSharingg"`}},
		{"invalid policy", []string{"--policy", write(t, "p.yaml", "apiVersion: guard.xila.us/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\nspec: {}\n"),
			"--evidence", evidence, "--tenant", "acme"}, ExitError, []string{"PlacementPolicy p is invalid", "acceptedSources"}},
		{"no tenant", []string{"--policy", write(t, "p.yaml", "apiVersion: guard.xila.us/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\nspec: {evidence: {acceptedSources: [nfd]}}\n"),
			"--evidence", evidence}, ExitError, []string{"no tenant"}},
		{"evidence of the wrong kind", []string{"--policy", policy, "--evidence", policy}, ExitError, []string{"want NodeSecurityStates and Nodes"}},
		{"missing file", []string{"--policy", policy, "--evidence", "nope.yaml"}, ExitError, []string{"nope.yaml"}},
		{"bad expectation", []string{"--policy", policy, "--evidence", evidence, "--expect", "maybe"}, ExitError, []string{"--expect"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, append([]string{"test"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit code %d, want %d\n%s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// world is a cluster of one tenant with a compliant and a time-sliced node,
// and a node of another pool.
func world(t *testing.T, objs ...runtime.Object) *fake.ClientBuilder {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{guard.LabelTenantPool: pool}}}
	}
	state := func(name string, mode v1alpha1.GPUSharingMode) *v1alpha1.NodeSecurityState {
		return &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: k8stypes.UID("uid-" + name), Incarnation: "b1", ObservedAt: at, Source: v1alpha1.SourceNFD, Complete: true,
			Devices: []v1alpha1.GPUDevice{{ID: "GPU-0", Vendor: "nvidia", Model: "H100", SharingMode: mode, CCMode: v1alpha1.CCModeOff}}}}
	}
	base := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-ml", Labels: map[string]string{guard.LabelTenant: "acme"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "acme-exclusive"}, Spec: v1alpha1.PlacementPolicySpec{
			Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}}}},
		&v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: "acme", Namespaces: []string{"acme-ml"}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: "acme-exclusive"}}},
		node("gpu-1", "acme"), node("gpu-2", "acme"), node("other-1", "globex"),
		state("gpu-1", v1alpha1.SharingExclusive), state("gpu-2", v1alpha1.SharingTimeSlicing),
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(append(base, objs...)...)
}

type clock time.Time

func (c clock) Now() time.Time { return time.Time(c) }

func TestExplain(t *testing.T) {
	at := clock(time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC))
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "train-0", UID: "p1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	drifted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "train-1", UID: "p2"},
		Spec: corev1.PodSpec{NodeName: "gpu-2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "train-2", UID: "p3"},
		Spec: corev1.PodSpec{NodeName: "gpu-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	failed := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "train-0.1"}, Reason: "FailedScheduling",
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "train-0", UID: "p1"}, Note: "0/3 nodes are available",
		EventTime: metav1.NewMicroTime(time.Time(at))}
	c := world(t, pending, drifted, running, web, failed).Build()
	ctx := context.Background()

	t.Run("a pending pod: every node, allowed first, with the fact and the fix", func(t *testing.T) {
		e, err := Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "train-0")
		if err != nil {
			t.Fatal(err)
		}
		if e.Tenant != "acme" || e.Policy != "acme-exclusive" || len(e.Nodes) != 3 || !e.Allowed() {
			t.Fatalf("explanation %+v", e)
		}
		if n := e.Nodes[0]; n.Node != "gpu-1" || n.Decision != guard.DecisionAllow {
			t.Errorf("first node %+v, want gpu-1 allowed", n)
		}
		byNode := map[string]NodeExplanation{}
		for _, n := range e.Nodes {
			byNode[n.Node] = n
		}
		if n := byNode["gpu-2"]; n.Decision != guard.DecisionDeny || !strings.Contains(n.Fact, "TimeSlicing") || !strings.Contains(n.Fix, "allow TimeSlicing in policy acme-exclusive") {
			t.Errorf("gpu-2 %+v", n)
		}
		if n := byNode["other-1"]; n.Decision != guard.DecisionDeny || n.Reasons[0] != guard.ReasonTenantMismatch || n.Pool != "globex" {
			t.Errorf("other-1 %+v", n)
		}
		if len(e.Events) != 1 || !strings.Contains(e.Events[0], "FailedScheduling: 0/3") {
			t.Errorf("events %v", e.Events)
		}
		var out bytes.Buffer
		PrintExplanation(&out, e)
		for _, w := range []string{"Pod acme-ml/train-0 (Pending, not bound to a node)", "Tenant acme, policy acme-exclusive, profile production", "gpu-2", "Xila Guard allows some nodes"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, out.String())
			}
		}
	})
	t.Run("a running pod on a node its policy refuses now is drift", func(t *testing.T) {
		e, err := Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "train-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Nodes) != 1 || e.Nodes[0].Node != "gpu-2" || e.Allowed() {
			t.Fatalf("explanation %+v", e)
		}
		var out bytes.Buffer
		PrintExplanation(&out, e)
		if !strings.Contains(out.String(), "Drift: the pod runs on gpu-2") {
			t.Errorf("output:\n%s", out.String())
		}
	})
	t.Run("a running pod still allowed", func(t *testing.T) {
		e, err := Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "train-2")
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Nodes) != 1 || !e.Allowed() {
			t.Fatalf("explanation %+v", e)
		}
	})
	t.Run("evidence judged later is stale", func(t *testing.T) {
		e, err := Explain(ctx, c, guard.ProfileProduction, clock(time.Time(at).Add(time.Hour)), "acme-ml", "train-2")
		if err != nil {
			t.Fatal(err)
		}
		if e.Allowed() || e.Nodes[0].Reasons[0] != guard.ReasonEvidenceStale {
			t.Fatalf("explanation %+v", e.Nodes)
		}
	})
	t.Run("a pod of no tenant is not judged", func(t *testing.T) {
		e, err := Explain(ctx, c, guard.ProfileProduction, at, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		if e.Protected || len(e.Nodes) != 0 {
			t.Fatalf("explanation %+v", e)
		}
	})
	t.Run("a pod that does not exist", func(t *testing.T) {
		if _, err := Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("error %v", err)
		}
	})
}
