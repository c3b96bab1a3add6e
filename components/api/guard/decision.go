package guard

// Decision is the evaluator's answer for one pod on one node. Only
// DecisionAllow admits a placement; every other value, and every failure to
// obtain one, blocks it.
type Decision string

const (
	// DecisionAllow means the node's evidence satisfies the policy.
	DecisionAllow Decision = "allow"
	// DecisionDeny means the evidence shows that the policy is violated.
	DecisionDeny Decision = "deny"
	// DecisionIndeterminate means the evaluator cannot tell: the tenant or
	// policy is unknown, or the evidence is missing, stale, incomplete,
	// inconsistent or from a source that is not accepted.
	DecisionIndeterminate Decision = "indeterminate"
)

// Decisions lists every decision, in order of increasing severity of doubt.
var Decisions = []Decision{DecisionAllow, DecisionDeny, DecisionIndeterminate}

// IsValid reports whether d is one of the three decisions.
func (d Decision) IsValid() bool {
	switch d {
	case DecisionAllow, DecisionDeny, DecisionIndeterminate:
		return true
	}
	return false
}

// Profile selects how strictly the evaluator treats simulated evidence.
type Profile string

const (
	// ProfileProduction never accepts mock evidence, whatever a policy says.
	ProfileProduction Profile = "production"
	// ProfileLab accepts mock evidence as simulated integration and says so
	// in every result that relied on it. It proves wiring, not isolation.
	ProfileLab Profile = "lab"
)

// Profiles lists every profile, strictest first.
var Profiles = []Profile{ProfileProduction, ProfileLab}

// IsValid reports whether p names a profile.
func (p Profile) IsValid() bool {
	return p == ProfileProduction || p == ProfileLab
}

// Stricter returns the stricter of p and q, so that a caller can ask for a
// stricter profile than the evaluator runs with but never a laxer one.
func (p Profile) Stricter(q Profile) Profile {
	if p == ProfileProduction || q == ProfileProduction {
		return ProfileProduction
	}
	return ProfileLab
}
