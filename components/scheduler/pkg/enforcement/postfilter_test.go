package enforcement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// TestPostFilterNamesRefusedNodes: when no node passes, PostFilter names
// the refused pool nodes grouped by reason, and says nothing for a pod
// that is not protected or a snapshot with no refusal.
func TestPostFilterNamesRefusedNodes(t *testing.T) {
	w := acmeWorld()
	timeSliced(&w.states[0].Spec)
	w.states[1].Spec.Devices[0].SharingMode = v1alpha1.SharingTimeSlicing
	h := w.start(t)
	p := pod(acmeNS, "train")
	c := h.schedule(p)
	if c.filter["a1"].IsSuccess() || c.filter["a2"].IsSuccess() {
		t.Fatalf("filter: a1 %v, a2 %v; want both refused", c.filter["a1"], c.filter["a2"])
	}
	// The test framework registers no PostFilter; the scheduler's
	// integration test sees the message in FailedScheduling.
	_, st := h.pl.PostFilter(context.Background(), c.state, p, nil)
	want := "Xila Guard refused " + string(guard.ReasonTimeSlicingForbidden) + ": a1, a2"
	if st.Code() != fwk.Unschedulable || st.Message() != want {
		t.Errorf("PostFilter: %v %q, want Unschedulable %q", st.Code(), st.Message(), want)
	}

	plain := pod(plain, "web")
	c = h.schedule(plain)
	if _, st := h.pl.PostFilter(context.Background(), c.state, plain, nil); st.Message() != "" {
		t.Errorf("PostFilter for a pod of no tenant says %q", st.Message())
	}
}

func TestRefusedNodesGroups(t *testing.T) {
	judged := map[string]*judgement{
		"ok":    {decision: guard.DecisionAllow},
		"again": {decision: guard.DecisionIndeterminate, reasons: []guard.Reason{guard.ReasonAttestationStale}, rechallenge: true},
		"stale": {decision: guard.DecisionIndeterminate, reasons: []guard.Reason{guard.ReasonEvidenceStale}},
		"none":  {decision: guard.DecisionIndeterminate},
	}
	for i := range 7 {
		judged[fmt.Sprintf("ts-%d", i)] = &judgement{decision: guard.DecisionDeny, reasons: []guard.Reason{guard.ReasonTimeSlicingForbidden, guard.ReasonMIGForbidden}}
	}
	got := refusedNodes(judged)
	want := "Xila Guard refused TIME_SLICING_FORBIDDEN+MIG_FORBIDDEN: ts-0, ts-1, ts-2, ts-3, ts-4 and 2 more; EVIDENCE_STALE: stale; INDETERMINATE: none"
	if got != want {
		t.Errorf("refusedNodes:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(got, "again") || strings.Contains(got, "ok") {
		t.Error("names a node that passed or that PreBind attests again")
	}
	if refusedNodes(map[string]*judgement{"ok": {decision: guard.DecisionAllow}}) != "" {
		t.Error("a snapshot with no refusal says something")
	}
}
