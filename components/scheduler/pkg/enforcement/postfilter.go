package enforcement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// maxNamedNodes is how many nodes one reason's group names before it
// only counts the rest, so FailedScheduling stays one readable line on a
// pool of hundreds.
const maxNamedNodes = 5

// PostFilter preempts nothing. It runs when no node passed Filter and
// names the tenant's pool nodes Xila Guard refused, grouped by their
// reason codes, e.g. "Xila Guard refused TIME_SLICING_FORBIDDEN: a1, a2;
// EVIDENCE_STALE: a3". The scheduler adds it to the FailedScheduling
// message after its "0/N nodes are available" summary, which groups
// nodes by message and so cannot say which nodes.
func (pl *Enforcement) PostFilter(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	st, err := readState(cs)
	if err != nil || !st.id.protected {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if msg := refusedNodes(st.judged); msg != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// refusedNodes groups the refused nodes of a snapshot by their reasons;
// "" when none was refused.
func refusedNodes(judged map[string]*judgement) string {
	groups := map[string][]string{}
	for name, j := range judged {
		if j.decision == guard.DecisionAllow || j.rechallenge {
			continue
		}
		codes := make([]string, 0, len(j.reasons))
		for _, r := range j.reasons {
			codes = append(codes, string(r))
		}
		key := strings.Join(codes, "+")
		if key == "" {
			key = strings.ToUpper(string(j.decision))
		}
		groups[key] = append(groups[key], name)
	}
	if len(groups) == 0 {
		return ""
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	// Most nodes first, then by code.
	slices.SortFunc(keys, func(a, b string) int {
		if d := len(groups[b]) - len(groups[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		nodes := groups[k]
		slices.Sort(nodes)
		named := strings.Join(nodes[:min(len(nodes), maxNamedNodes)], ", ")
		if extra := len(nodes) - maxNamedNodes; extra > 0 {
			named += fmt.Sprintf(" and %d more", extra)
		}
		parts = append(parts, k+": "+named)
	}
	return "Xila Guard refused " + strings.Join(parts, "; ")
}
