package evaluate

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/benchdata"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func TestNew(t *testing.T) {
	cases := []struct {
		name        string
		opts        Options
		wantProfile guard.Profile
		wantErr     bool
	}{
		{name: "defaults to production", wantProfile: guard.ProfileProduction},
		{name: "lab", opts: Options{Profile: guard.ProfileLab}, wantProfile: guard.ProfileLab},
		{name: "unknown profile", opts: Options{Profile: "staging"}, wantErr: true},
		{name: "negative skew", opts: Options{ClockSkew: -1}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New() error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && e.Profile() != tc.wantProfile {
				t.Errorf("Profile() = %q, want %q", e.Profile(), tc.wantProfile)
			}
		})
	}
}

func TestEvaluateAnswersEveryNodeInOrder(t *testing.T) {
	req := request(poolNode(compliantState()))
	req.Nodes = []wire.Node{
		{Name: "good", UID: "uid-1", Pool: "acme", State: compliantState()},
		{Name: "bare", Pool: "acme"},
		{Name: "foreign", Pool: "globex", State: compliantState()},
		{Name: "sliced", UID: "uid-1", Pool: "acme", State: compliantState(
			func(s *v1alpha1.NodeSecurityStateSpec) { s.Incarnation = "inc-9" },
			allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing }))},
	}
	resp := newEvaluator(guard.ProfileProduction).Evaluate(req)

	type brief struct {
		Node        string
		Decision    guard.Decision
		Reasons     []guard.Reason
		Incarnation string
	}
	var got []brief
	for _, r := range resp.Results {
		got = append(got, brief{r.Node, r.Decision, r.Reasons, r.Incarnation})
	}
	want := []brief{
		{"good", guard.DecisionAllow, []guard.Reason{}, "inc-1"},
		{"bare", guard.DecisionIndeterminate, []guard.Reason{guard.ReasonEvidenceMissing}, ""},
		{"foreign", guard.DecisionDeny, []guard.Reason{guard.ReasonTenantMismatch}, "inc-1"},
		{"sliced", guard.DecisionDeny, []guard.Reason{guard.ReasonTimeSlicingForbidden}, "inc-9"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	if resp.Profile != guard.ProfileProduction || !resp.EvaluatedAt.Time.Equal(now) {
		t.Errorf("profile %q at %s, want production at %s", resp.Profile, resp.EvaluatedAt.Time, now)
	}
	if resp.Pod.Decision != guard.DecisionAllow {
		t.Errorf("pod verdict %+v, want allow", resp.Pod)
	}
}

func TestPodVerdictRefusesEveryNode(t *testing.T) {
	req := request(poolNode(compliantState()))
	req.Policy = nil
	req.Nodes = append(req.Nodes, wire.Node{Name: "free", Pool: ""})
	resp := newEvaluator(guard.ProfileLab).Evaluate(req)
	want := wire.Verdict{
		Decision: guard.DecisionIndeterminate,
		Reasons:  []guard.Reason{guard.ReasonNoPolicy},
		Message:  resp.Pod.Message,
	}
	if diff := cmp.Diff(want, resp.Pod); diff != "" {
		t.Errorf("pod verdict mismatch (-want +got):\n%s", diff)
	}
	for _, r := range resp.Results {
		if got := (wire.Verdict{Decision: r.Decision, Reasons: r.Reasons, Message: r.Message}); !cmp.Equal(want, got) {
			t.Errorf("node %s: %+v, want the pod's verdict %+v", r.Node, got, want)
		}
	}
}

func TestEvaluateWithoutNodes(t *testing.T) {
	req := request(poolNode(nil))
	req.Nodes = nil
	resp := newEvaluator(guard.ProfileProduction).Evaluate(req)
	if resp.Pod.Decision != guard.DecisionAllow || len(resp.Results) != 0 || resp.Results == nil {
		t.Errorf("got pod %+v and results %#v, want allow and an empty list", resp.Pod, resp.Results)
	}
}

func TestEvaluateIsDeterministic(t *testing.T) {
	e := newEvaluator(guard.ProfileLab)
	for _, cases := range allRuleCases() {
		for _, tc := range cases {
			req := request(poolNode(compliantState()))
			if tc.req != nil {
				tc.req(req)
			}
			first, second := e.Evaluate(req), e.Evaluate(req)
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("%s: two evaluations differ (-first +second):\n%s", tc.name, diff)
			}
		}
	}
}

// TestEvaluateInParallel decides a large request with mixed answers on
// several CPUs and one at a time: the answers must be identical.
func TestEvaluateInParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Logf("GOMAXPROCS is %d; raising it to 4 for this test", runtime.GOMAXPROCS(0))
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	}
	e := newEvaluator(guard.ProfileLab)
	req := benchdata.Request(3001, 2, now)
	// Every seventh node in another pool, every eleventh without evidence.
	for i := range req.Nodes {
		switch {
		case i%7 == 0:
			req.Nodes[i].Pool = "other"
		case i%11 == 0:
			req.Nodes[i].State = nil
		}
	}
	parallel := e.Evaluate(req)
	sequential := tuned(e, e.memoNodes, len(req.Nodes)+1).Evaluate(req)
	if diff := cmp.Diff(sequential, parallel); diff != "" {
		t.Fatalf("parallel answer differs (-sequential +parallel):\n%s", diff)
	}
	decisions := map[guard.Decision]int{}
	for _, r := range parallel.Results {
		decisions[r.Decision]++
	}
	if decisions[guard.DecisionAllow] == 0 || decisions[guard.DecisionDeny] == 0 || decisions[guard.DecisionIndeterminate] == 0 {
		t.Fatalf("want allows, denials and indeterminate answers, got %v", decisions)
	}
}

// TestEveryReasonIsTested fails when a reason code has no rule case that
// produces it, so that a new reason cannot land without a test.
func TestEveryReasonIsTested(t *testing.T) {
	produced := map[guard.Reason]bool{}
	for _, cases := range allRuleCases() {
		for _, tc := range cases {
			for _, r := range tc.evaluate(t).Reasons {
				produced[r] = true
			}
		}
	}
	for _, r := range guard.Reasons {
		if !produced[r] {
			t.Errorf("no rule case produces %s", r)
		}
	}
	for r := range produced {
		if !slices.Contains(guard.Reasons, r) {
			t.Errorf("reason %s is produced but missing from guard.Reasons", r)
		}
	}
}

func TestSeverity(t *testing.T) {
	notes := []guard.Reason{guard.ReasonUnguardedNode, guard.ReasonSimulatedEvidence}
	denials := []guard.Reason{
		guard.ReasonTenantMismatch, guard.ReasonOutsidePool, guard.ReasonExclusiveForbidden,
		guard.ReasonMIGForbidden, guard.ReasonMPSForbidden, guard.ReasonTimeSlicingForbidden,
		guard.ReasonCCModeMismatch, guard.ReasonTEEMissing, guard.ReasonTEETypeNotAllowed,
		guard.ReasonMeasurementNotAllowed, guard.ReasonMeasurementExpired, guard.ReasonTCBOutOfDate, guard.ReasonAttestationFailed,
	}
	for _, r := range append(guard.Reasons, "SOMETHING_NEW") {
		want := guard.DecisionIndeterminate
		switch {
		case slices.Contains(notes, r):
			want = guard.DecisionAllow
		case slices.Contains(denials, r):
			want = guard.DecisionDeny
		}
		if got := severity(r); got != want {
			t.Errorf("severity(%s) = %s, want %s", r, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"acme": "acme", "gpu-node-1.example": "gpu-node-1.example", "sha256:ab": "sha256:ab",
		"": `""`, "two words": `"two words"`, "new\nline": `"new\nline"`, `"quoted"`: `"\"quoted\""`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestMemoChangesNoAnswer decides a large request, whose messages the
// evaluator remembers and shares between nodes, and every node of it in a
// request of its own, where nothing is remembered: each node's answer must
// be the same. The nodes differ in every fact a message quotes: evidence
// age, source, device count and sharing mode, pool and presence of
// evidence.
func TestMemoChangesNoAnswer(t *testing.T) {
	e := newEvaluator(guard.ProfileLab)
	req := benchdata.Request(3*memoNodesDefault, 1, now)
	modes := []v1alpha1.GPUSharingMode{v1alpha1.SharingExclusive, v1alpha1.SharingTimeSlicing, v1alpha1.SharingMPS, v1alpha1.SharingMIG}
	sources := []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD, v1alpha1.SourceMock}
	for i := range req.Nodes {
		n := &req.Nodes[i]
		s := n.State
		s.ObservedAt.Time = s.ObservedAt.Add(-time.Duration(i%5) * time.Second)
		s.Source = sources[i%len(sources)]
		mode := modes[(i/3)%len(modes)]
		device := s.Devices[0]
		s.Devices = make([]v1alpha1.GPUDevice, 1+i%3)
		for j := range s.Devices {
			s.Devices[j] = device
			s.Devices[j].ID = fmt.Sprintf("gpu-%d", j)
			s.Devices[j].SharingMode = mode
		}
		switch {
		case i%13 == 0:
			n.Pool = fmt.Sprintf("pool-%d", i%2)
		case i%17 == 0:
			n.State = nil
		}
	}
	whole := e.Evaluate(req)
	decisions := map[guard.Decision]int{}
	for _, r := range checkEachAlone(t, e, req, whole) {
		decisions[r.Decision]++
	}
	if decisions[guard.DecisionAllow] == 0 || decisions[guard.DecisionDeny] == 0 || decisions[guard.DecisionIndeterminate] == 0 {
		t.Fatalf("want allows, denials and indeterminate answers, got %v", decisions)
	}
	// Results that share a remembered list of reasons do not share its
	// growth.
	for i := range whole.Results {
		if r := whole.Results[i].Reasons; len(r) != cap(r) {
			t.Fatalf("node %d: reasons %v have spare capacity %d, which an append would share", i, r, cap(r))
		}
	}
}

// tuned is a copy of e that remembers messages from memo nodes on and uses
// several CPUs from parallel nodes on.
func tuned(e *Evaluator, memo, parallel int) *Evaluator {
	c := *e
	c.memoNodes, c.parallelNodes = memo, parallel
	return &c
}
