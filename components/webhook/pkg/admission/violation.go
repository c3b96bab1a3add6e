package admission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Rule names, as they appear in refusals, logs and docs/webhook.md.
const (
	RuleScheduler      = "protected-scheduler"
	RuleNodeName       = "protected-node-name"
	RulePrivileged     = "protected-privileged"
	RuleHostNamespaces = "protected-host-namespaces"
	RuleHostPath       = "protected-host-path"
	RulePodSecurity    = "protected-pod-security"
	RuleImages         = "protected-images"
	RuleForeignPool    = "protected-foreign-pool"
	RuleTenant         = "protected-tenant"
	RuleEvaluator      = "protected-evaluator"
	RulePoolToleration = "pool-toleration"
	RulePoolSelector   = "pool-selector"
	RulePoolNodeName   = "pool-node-name"
	RuleBinding        = "binding"
	RuleMirrorPod      = "protected-mirror-pod"
	RulePodAddress     = "protected-pod-address"
	RuleRecord         = "binding-record"
	RuleNodePool       = "node-pool-lock"
	RuleRequest        = "request"
	RuleLookup         = "lookup"
)

// violation is one broken rule. Two violations with the same key are the
// same finding, which is how an UPDATE tells new findings from old ones.
type violation struct {
	rule   string
	reason guard.Reason
	// field is the path of the offending field, e.g.
	// spec.initContainers[0].securityContext.privileged.
	field string
	// detail explains the violation to a person.
	detail string
}

func (v violation) key() string { return string(v.reason) + "|" + v.field + "|" + v.detail }

// String renders "rule (REASON): detail".
func (v violation) String() string {
	return fmt.Sprintf("rule %s (%s): %s", v.rule, v.reason, v.detail)
}

// added returns the violations of now that were not already in before, so
// that an UPDATE is refused only for what it introduces: a pod that
// predates a rule can still have its labels or finalizers changed.
func added(now, before []violation) []violation {
	if len(before) == 0 {
		return now
	}
	seen := make(map[string]bool, len(before))
	for _, v := range before {
		seen[v.key()] = true
	}
	var out []violation
	for _, v := range now {
		if !seen[v.key()] {
			out = append(out, v)
		}
	}
	return out
}

// message joins violations into one line for the refusal.
func message(subject string, vs []violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return "xila-guard: " + subject + " denied: " + strings.Join(parts, "; ")
}

// reasons lists the distinct reason codes of vs in order.
func reasons(vs []violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, string(v.reason)) {
			out = append(out, string(v.reason))
		}
	}
	return out
}
