package evaluate

import (
	"strings"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// finding is one reason with the detail that explains it on this node.
type finding struct {
	reason guard.Reason
	detail string
}

// severity returns the decision a reason forces on its own. Notes that
// accompany an allow have none.
func severity(r guard.Reason) guard.Decision {
	switch r {
	case guard.ReasonTenantMismatch, guard.ReasonOutsidePool,
		guard.ReasonExclusiveForbidden, guard.ReasonMIGForbidden, guard.ReasonMPSForbidden,
		guard.ReasonTimeSlicingForbidden, guard.ReasonCCModeMismatch, guard.ReasonTEEMissing,
		guard.ReasonTEETypeNotAllowed, guard.ReasonMeasurementNotAllowed, guard.ReasonMeasurementExpired,
		guard.ReasonTCBOutOfDate, guard.ReasonAttestationFailed:
		return guard.DecisionDeny
	case guard.ReasonUnguardedNode, guard.ReasonSimulatedEvidence:
		return guard.DecisionAllow
	}
	// Every other reason, including any added later and not listed here,
	// means the evaluator cannot tell.
	return guard.DecisionIndeterminate
}

// decide turns findings into a decision: any deny wins, then any doubt;
// only findings that are all notes allow.
func decide(findings []finding) guard.Decision {
	decision := guard.DecisionAllow
	for _, f := range findings {
		switch severity(f.reason) {
		case guard.DecisionDeny:
			return guard.DecisionDeny
		case guard.DecisionIndeterminate:
			decision = guard.DecisionIndeterminate
		}
	}
	return decision
}

// verdict renders findings. The message lists each reason with its detail,
// so that it reads on its own in an event or a log line.
func verdict(findings []finding, allowMessage string) wire.Verdict {
	v := wire.Verdict{Decision: decide(findings), Reasons: make([]guard.Reason, 0, len(findings))}
	if len(findings) == 0 {
		v.Message = allowMessage
		return v
	}
	var b strings.Builder
	if v.Decision == guard.DecisionAllow {
		b.WriteString(allowMessage)
	}
	for i, f := range findings {
		v.Reasons = append(v.Reasons, f.reason)
		if i > 0 || b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(string(f.reason))
		b.WriteString(": ")
		b.WriteString(f.detail)
	}
	v.Message = b.String()
	return v
}
