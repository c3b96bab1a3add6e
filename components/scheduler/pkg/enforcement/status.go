package enforcement

import (
	"fmt"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// nodeStatus turns the evaluator's answer about a node into a Filter (or
// Bind) status, following the condition table of the architecture:
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

// mismatchStatus refuses every node when the evaluator's answer does not
// match its request: no node is allowed on an answer that cannot be read
// node by node.
func mismatchStatus(err error) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"Xila Guard refused the pod: %s: %v, so no node is allowed", guard.ReasonEvaluatorError, err))
}

// nodeChanged refuses a bind whose node is not the one that was judged.
func nodeChanged(format string, args ...any) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		"Xila Guard refused the bind: "+string(guard.ReasonNodeChanged)+": "+fmt.Sprintf(format, args...))
}
