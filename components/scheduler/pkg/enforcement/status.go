package enforcement

import (
	"context"
	"errors"
	"fmt"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// nodeStatus turns the evaluator's answer about a node into a Filter (or
// PreBind) status, following the condition table of the architecture:
//
//	allow                               Success
//	deny                                Unschedulable
//	deny on placement (TENANT_MISMATCH,
//	  OUTSIDE_POOL)                     UnschedulableAndUnresolvable
//	indeterminate                       UnschedulableAndUnresolvable
//
// A placement denial is unresolvable because no preemption can move a node
// into the tenant's pool. The evaluator's message, which already names the
// reason codes, is used verbatim.
func nodeStatus(j *judgement) *fwk.Status {
	switch j.decision {
	case guard.DecisionAllow:
		return nil
	case guard.DecisionDeny:
		code := fwk.Unschedulable
		if slices.Contains(j.reasons, guard.ReasonTenantMismatch) || slices.Contains(j.reasons, guard.ReasonOutsidePool) {
			code = fwk.UnschedulableAndUnresolvable
		}
		return fwk.NewStatus(code, "node(s) refused by Xila Guard (deny): "+j.message)
	default:
		// indeterminate, and any decision this version does not know.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) refused by Xila Guard ("+string(j.decision)+"): "+j.message)
	}
}

// podStatus refuses a pod on every node because the evaluator refused it
// before looking at any: the tenant or the policy is missing. note says
// what the plugin found while resolving them.
func podStatus(v wire.Verdict, note string) *fwk.Status {
	msg := "Xila Guard refused the pod (" + string(v.Decision) + "): " + v.Message
	if note != "" {
		msg += " (" + note + ")"
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// tenantMismatch refuses a node of another pool without asking the
// evaluator, whose answer would be the same whatever the evidence.
func tenantMismatch(nodePool string, id *identity) *fwk.Status {
	if !id.protected {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"node(s) refused by Xila Guard: %s: the node is in pool %s, and the pod's namespace belongs to no tenant",
			guard.ReasonTenantMismatch, nodePool))
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"node(s) refused by Xila Guard (deny): %s: the node is in pool %s, not in pool %s of tenant %s",
		guard.ReasonTenantMismatch, nodePool, id.pool(), id.tenant.ID))
}

// failureReason classifies an evaluator failure by the caller reasons.
func failureReason(err error) guard.Reason {
	switch {
	case errors.Is(err, client.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return guard.ReasonEvaluatorTimeout
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, context.Canceled):
		return guard.ReasonEvaluatorUnavailable
	}
	return guard.ReasonEvaluatorError
}

// evaluatorStatus refuses every node when no decision could be obtained:
// a timeout, an unreachable evaluator, an error status or an answer that
// does not add up is never an allow.
func evaluatorStatus(err error) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"Xila Guard refused the pod: %s: no decision from the evaluator, so no node is allowed: %v", failureReason(err), err))
}

// nodeChanged refuses a bind whose node is not the one that was judged.
func nodeChanged(format string, args ...any) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		"Xila Guard refused the bind: "+string(guard.ReasonNodeChanged)+": "+fmt.Sprintf(format, args...))
}
