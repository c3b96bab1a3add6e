package admission

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// coveredChecks are the Pod Security checks that the webhook's own rules
// already judge with reason codes of their own (PRIVILEGED_CONTAINER,
// HOST_NETWORK, HOST_PID, HOST_IPC, HOST_PATH_VOLUME); leaving them out
// keeps a refusal from naming the same finding twice.
var coveredChecks = []policy.CheckID{"privileged", "hostNamespaces", "hostPathVolumes"}

// podSecurity judges pods against the Kubernetes Pod Security Standards
// with the checks of the pod-security-admission library, at their latest
// version.
type podSecurity struct {
	eval policy.Evaluator
}

func newPodSecurity() (*podSecurity, error) {
	var checks []policy.Check
	for _, c := range policy.DefaultChecks() {
		if !slices.Contains(coveredChecks, c.ID) {
			checks = append(checks, c)
		}
	}
	eval, err := policy.NewEvaluator(checks, nil)
	if err != nil {
		return nil, fmt.Errorf("the Pod Security checks: %w", err)
	}
	return &podSecurity{eval: eval}, nil
}

// violations are the controls of level that pod breaks, one violation per
// control, named as Pod Security admission names it.
func (s *podSecurity) violations(pod *corev1.Pod, level v1alpha1.PodSecurityLevel) []violation {
	lv := psaapi.LevelVersion{Level: psaapi.LevelBaseline, Version: psaapi.LatestVersion()}
	reason := guard.ReasonPodSecurityBaseline
	if level == v1alpha1.PodSecurityRestricted {
		lv.Level, reason = psaapi.LevelRestricted, guard.ReasonPodSecurityRestricted
	}
	var out []violation
	for _, r := range s.eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec) {
		if r.Allowed {
			continue
		}
		detail := fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), r.ForbiddenReason)
		if r.ForbiddenDetail != "" {
			detail += " (" + r.ForbiddenDetail + ")"
		}
		out = append(out, violation{RulePodSecurity, reason, "spec", detail})
	}
	return out
}

// podSecurityLevel is the level a policy asks for; baseline without one.
func podSecurityLevel(p *wire.Policy) v1alpha1.PodSecurityLevel {
	if p != nil && p.Spec.PodSecurity == v1alpha1.PodSecurityRestricted {
		return v1alpha1.PodSecurityRestricted
	}
	return v1alpha1.PodSecurityBaseline
}
