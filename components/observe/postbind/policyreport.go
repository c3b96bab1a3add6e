package postbind

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
)

// What the policy reports say. Readers of wgpolicyk8s.io reports
// (policy-reporter, its UI, kubectl) group results by source, policy and
// rule.
const (
	// PolicyReportName names the PolicyReport kept in each namespace with
	// protected pods.
	PolicyReportName = "xila-guard"
	// PolicyReportSource is the source of every result.
	PolicyReportSource = "xila-guard"
	// PolicyReportCategory is the category of every result.
	PolicyReportCategory = "Xila Guard placement"
	// RulePlacement is the rule of a pod judged on its node: its first
	// decision there, or every decision while it is allowed.
	RulePlacement = "placement"
	// RuleDrift is the rule of a pod that was allowed on its node and is
	// not any more: the node's evidence, the node or the policy changed.
	RuleDrift = "drift"
	// PolicyUnresolved stands for the policy of a pod whose tenant or
	// policy could not be resolved (TENANT_UNRESOLVED, NO_POLICY).
	PolicyUnresolved = "unresolved"

	// Property keys of a result.
	PropertyNode     = "node"
	PropertyDecision = "decision"
	PropertyReasons  = "reasons"
	PropertyTenant   = "tenant"

	// labelManagedBy with managedBy marks the reports this controller
	// keeps; the controller reads and writes no other.
	labelManagedBy = guard.LabelManagedBy
	managedBy      = guard.ReportsManagedBy
)

// finding is the latest decision about one pod, as its result in the
// report tells it.
type finding struct {
	uid      types.UID
	node     string
	tenant   string
	policy   string
	decision guard.Decision
	reasons  []guard.Reason
	// drift is set when the pod was allowed on this node before and is
	// not now.
	drift bool
	// message is the evaluator's explanation when the decision was made;
	// it is not compared, for it tells ages that change every minute.
	message string
}

// same reports whether two findings tell the same result.
func (f finding) same(g finding) bool {
	return f.uid == g.uid && f.node == g.node && f.tenant == g.tenant && f.policy == g.policy &&
		f.decision == g.decision && slices.Equal(f.reasons, g.reasons) && f.drift == g.drift
}

// next is the finding that follows prev, when the pod is decided res.
func next(prev *finding, f finding) finding {
	if prev != nil && prev.uid == f.uid && prev.node == f.node && f.decision != guard.DecisionAllow {
		f.drift = prev.drift || prev.decision == guard.DecisionAllow
	}
	return f
}

// outcome maps a decision onto the report's results: allow passes; a
// decision the evaluator could not make (its reasons are all caller
// reasons such as EVALUATOR_UNAVAILABLE) is an error; anything else fails,
// for a pod runs where nothing allows it.
func outcome(d guard.Decision, reasons []guard.Reason) v1alpha2.Result {
	switch {
	case d == guard.DecisionAllow:
		return v1alpha2.ResultPass
	case d == guard.DecisionIndeterminate && len(reasons) > 0 && !slices.ContainsFunc(reasons, func(r guard.Reason) bool {
		return r != guard.ReasonEvaluatorTimeout && r != guard.ReasonEvaluatorUnavailable && r != guard.ReasonEvaluatorError
	}):
		return v1alpha2.ResultError
	default:
		return v1alpha2.ResultFail
	}
}

// resultOf is the report's result for one pod, found at now.
func resultOf(pod types.NamespacedName, f finding, now time.Time) v1alpha2.PolicyReportResult {
	rule := RulePlacement
	if f.drift {
		rule = RuleDrift
	}
	props := map[string]string{PropertyNode: f.node, PropertyDecision: string(f.decision)}
	if len(f.reasons) > 0 {
		props[PropertyReasons] = joinReasons(f.reasons)
	}
	if f.tenant != "" {
		props[PropertyTenant] = f.tenant
	}
	msg := fmt.Sprintf("%s on node %s", f.decision, f.node)
	if len(f.reasons) > 0 {
		msg += ": " + joinReasons(f.reasons)
	}
	if f.drift {
		msg = "no longer allowed: " + msg
	}
	if f.message != "" {
		msg += " (" + f.message + ")"
	}
	return v1alpha2.PolicyReportResult{
		Source:     PolicyReportSource,
		Policy:     f.policy,
		Rule:       rule,
		Category:   PolicyReportCategory,
		Severity:   v1alpha2.SeverityHigh,
		Timestamp:  metav1.Timestamp{Seconds: now.Unix()},
		Result:     outcome(f.decision, f.reasons),
		Scored:     true,
		Subjects:   []corev1.ObjectReference{{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: f.uid}},
		Message:    msg,
		Properties: props,
	}
}

// podFinding is a finding with the pod it is about.
type podFinding struct {
	pod types.NamespacedName
	finding
}

// results builds the results of a report from the findings, sorted by pod,
// carrying over from the previous results what has not changed: a result
// that says the same as before keeps its timestamp and message, and a pod
// that the previous report has drifted on the same node keeps its drift
// rule, which the controller cannot tell after a restart.
func results(findings []podFinding, previous []v1alpha2.PolicyReportResult, now time.Time) []v1alpha2.PolicyReportResult {
	before := make(map[types.UID]v1alpha2.PolicyReportResult, len(previous))
	for _, r := range previous {
		if len(r.Subjects) == 1 {
			before[r.Subjects[0].UID] = r
		}
	}
	findings = slices.Clone(findings)
	slices.SortFunc(findings, func(a, b podFinding) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	out := make([]v1alpha2.PolicyReportResult, 0, len(findings))
	for _, f := range findings {
		r := resultOf(f.pod, f.finding, now)
		if old, ok := before[f.uid]; ok {
			if !f.drift && r.Result != v1alpha2.ResultPass && old.Rule == RuleDrift && old.Properties[PropertyNode] == f.node {
				f.drift = true
				r = resultOf(f.pod, f.finding, now)
			}
			if sameResult(old, r) {
				r = old
			}
		}
		out = append(out, r)
	}
	return out
}

// sameResult reports whether two results say the same, whenever and in
// whichever words they were written.
func sameResult(a, b v1alpha2.PolicyReportResult) bool {
	a.Timestamp, b.Timestamp = metav1.Timestamp{}, metav1.Timestamp{}
	a.Message, b.Message = "", ""
	return equality.Semantic.DeepEqual(a, b)
}

// summarize counts results by outcome.
func summarize(results []v1alpha2.PolicyReportResult) v1alpha2.Summary {
	var s v1alpha2.Summary
	for _, r := range results {
		switch r.Result {
		case v1alpha2.ResultPass:
			s.Pass++
		case v1alpha2.ResultFail:
			s.Fail++
		case v1alpha2.ResultWarn:
			s.Warn++
		case v1alpha2.ResultError:
			s.Error++
		case v1alpha2.ResultSkip:
			s.Skip++
		}
	}
	return s
}
