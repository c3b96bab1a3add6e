package postbind

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
)

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		d       guard.Decision
		reasons []guard.Reason
		want    v1alpha2.Result
	}{
		{guard.DecisionAllow, nil, v1alpha2.ResultPass},
		{guard.DecisionDeny, []guard.Reason{guard.ReasonTimeSlicingForbidden}, v1alpha2.ResultFail},
		{guard.DecisionIndeterminate, []guard.Reason{guard.ReasonEvaluatorUnavailable}, v1alpha2.ResultError},
		{guard.DecisionIndeterminate, []guard.Reason{guard.ReasonEvaluatorTimeout, guard.ReasonEvaluatorError}, v1alpha2.ResultError},
		// Indeterminate for a reason about the node, not the evaluator:
		// the pod runs where nothing allows it.
		{guard.DecisionIndeterminate, []guard.Reason{guard.ReasonEvidenceMissing}, v1alpha2.ResultFail},
		{guard.DecisionIndeterminate, []guard.Reason{guard.ReasonEvaluatorError, guard.ReasonEvidenceMissing}, v1alpha2.ResultFail},
		{guard.DecisionIndeterminate, nil, v1alpha2.ResultFail},
	} {
		if got := outcome(c.d, c.reasons); got != c.want {
			t.Errorf("outcome(%s, %v) = %s, want %s", c.d, c.reasons, got, c.want)
		}
	}
}

func TestNextDrift(t *testing.T) {
	allow := finding{uid: "u1", node: "n1", decision: guard.DecisionAllow}
	deny := finding{uid: "u1", node: "n1", decision: guard.DecisionDeny, reasons: []guard.Reason{guard.ReasonTimeSlicingForbidden}}
	if got := next(&allow, deny); !got.drift {
		t.Error("allowed, then denied on the same node: not drift")
	}
	if got := next(nil, deny); got.drift {
		t.Error("denied at the first decision: drift")
	}
	drifted := next(&allow, deny)
	if got := next(&drifted, deny); !got.drift {
		t.Error("drift forgotten on the next denial")
	}
	if got := next(&drifted, allow); got.drift {
		t.Error("allowed again, still drift")
	}
	other := deny
	other.node = "n2"
	if got := next(&allow, other); got.drift {
		t.Error("denied on another node: drift")
	}
	recreated := deny
	recreated.uid = "u2"
	if got := next(&allow, recreated); got.drift {
		t.Error("a new pod of the same name: drift")
	}
}

func TestResultsCarryOver(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pod := types.NamespacedName{Namespace: "acme", Name: "train-0"}
	deny := podFinding{pod: pod, finding: finding{uid: "u1", node: "n1", policy: "p", decision: guard.DecisionDeny,
		reasons: []guard.Reason{guard.ReasonTimeSlicingForbidden}, drift: true, message: "GPU 0 is time-sliced"}}
	first := results([]podFinding{deny}, nil, t0)
	if len(first) != 1 || first[0].Rule != RuleDrift || first[0].Result != v1alpha2.ResultFail || first[0].Timestamp.Seconds != 1000 {
		t.Fatalf("first results %+v", first)
	}

	t.Run("the same finding later keeps the result as written", func(t *testing.T) {
		again := deny
		again.message = "GPU 0 is time-sliced (seen 5m ago)"
		got := results([]podFinding{again}, first, t0.Add(time.Minute))
		if got[0].Timestamp.Seconds != 1000 || got[0].Message != first[0].Message {
			t.Errorf("result rewritten: %+v", got[0])
		}
	})
	t.Run("after a restart a failing pod keeps the drift the report told", func(t *testing.T) {
		restarted := deny
		restarted.drift = false
		got := results([]podFinding{restarted}, first, t0.Add(time.Minute))
		if got[0].Rule != RuleDrift || got[0].Timestamp.Seconds != 1000 {
			t.Errorf("drift lost by a restart: %+v", got[0])
		}
	})
	t.Run("a changed finding is a new result", func(t *testing.T) {
		allow := deny
		allow.decision, allow.reasons, allow.drift = guard.DecisionAllow, nil, false
		got := results([]podFinding{allow}, first, t0.Add(time.Minute))
		if got[0].Result != v1alpha2.ResultPass || got[0].Rule != RulePlacement || got[0].Timestamp.Seconds != 1060 {
			t.Errorf("result %+v", got[0])
		}
	})
	t.Run("results are sorted by pod and counted", func(t *testing.T) {
		b := podFinding{pod: types.NamespacedName{Namespace: "acme", Name: "a"}, finding: finding{uid: "u2", node: "n1", policy: "p", decision: guard.DecisionAllow}}
		e := podFinding{pod: types.NamespacedName{Namespace: "acme", Name: "b"}, finding: finding{uid: "u3", node: "n1", policy: "p",
			decision: guard.DecisionIndeterminate, reasons: []guard.Reason{guard.ReasonEvaluatorUnavailable}}}
		got := results([]podFinding{deny, e, b}, nil, t0)
		if got[0].Subjects[0].Name != "a" || got[1].Subjects[0].Name != "b" || got[2].Subjects[0].Name != "train-0" {
			t.Errorf("order %v, %v, %v", got[0].Subjects[0].Name, got[1].Subjects[0].Name, got[2].Subjects[0].Name)
		}
		if s := summarize(got); s != (v1alpha2.Summary{Pass: 1, Fail: 1, Error: 1}) {
			t.Errorf("summary %+v", s)
		}
	})
}
