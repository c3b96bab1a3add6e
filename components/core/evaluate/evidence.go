package evaluate

import (
	"fmt"
	"strings"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// admissible is stage 3: whether the evidence can be relied on at all. Every
// problem is reported, since an operator fixing one wants to see the others.
func (in *input) admissible(n *wire.Node, s *v1alpha1.NodeSecurityStateSpec) []finding {
	var findings []finding
	if n.UID != "" && s.NodeUID != n.UID {
		findings = append(findings, finding{guard.ReasonEvidenceNodeMismatch, fmt.Sprintf(
			"the evidence describes node UID %s, but the node's UID is %s", quote(string(s.NodeUID)), quote(string(n.UID)))})
	}
	if detail, ok := in.sourceAccepted(s.Source); !ok {
		findings = append(findings, finding{guard.ReasonSourceNotAccepted, detail})
	}
	findings = in.freshness(findings, s)
	if detail := in.incompleteness(n, s); detail != "" {
		findings = append(findings, finding{guard.ReasonEvidenceIncomplete, detail})
	}
	return findings
}

// incompleteness explains why the evidence is incomplete, or returns ""
// when it is not: the publisher said so, a fact a rule needs is unknown,
// or the devices it lists do not account for the GPUs the node offers.
func (in *input) incompleteness(n *wire.Node, s *v1alpha1.NodeSecurityStateSpec) string {
	var parts []string
	if !s.Complete {
		parts = append(parts, "the publisher marked the evidence incomplete")
	}
	if missing := in.missingFacts(s); len(missing) > 0 {
		parts = append(parts, "the policy needs facts the evidence lacks: "+strings.Join(missing, ", "))
	}
	if gap := in.gpuGap(n.AllocatableGPUs, n.AllocatableSharedGPUs, s.Devices); gap != "" {
		parts = append(parts, gap)
	}
	return strings.Join(parts, ", and ")
}

// sourceAccepted applies the profile before the policy: production never
// accepts mock, and lab accepts it as a stand-in for any real source.
func (in *input) sourceAccepted(src v1alpha1.EvidenceSource) (string, bool) {
	if src == v1alpha1.SourceMock {
		if in.profile == guard.ProfileLab {
			return "", true
		}
		return "mock evidence is simulated and the production profile never accepts it", false
	}
	accepted := in.policy.Spec.Evidence.AcceptedSources
	if src != "" && contains(accepted, src) {
		return "", true
	}
	return fmt.Sprintf("source %s is not among the accepted sources %s of policy %s",
		quote(string(src)), quoteList(accepted), in.policyQ), false
}

func (in *input) freshness(findings []finding, s *v1alpha1.NodeSecurityStateSpec) []finding {
	if s.ObservedAt.IsZero() {
		return append(findings, finding{guard.ReasonEvidenceStale, "the evidence has no observedAt time"})
	}
	elapsed := in.now.Sub(s.ObservedAt.Time)
	switch {
	case elapsed > in.maxAge:
		return append(findings, finding{guard.ReasonEvidenceStale, fmt.Sprintf(
			"the evidence was observed %s ago, more than maxAge %s", age(elapsed), in.maxAge)})
	case -elapsed > in.skew:
		return append(findings, finding{guard.ReasonClockSkew, fmt.Sprintf(
			"the evidence's observedAt lies %s in the future", age(-elapsed))})
	}
	return findings
}

// missingFacts lists the facts a rule of the policy needs and the evidence
// does not give, by their field names.
func (in *input) missingFacts(s *v1alpha1.NodeSecurityStateSpec) []string {
	var missing []string
	for i := range s.Devices {
		d := &s.Devices[i]
		if in.sharing != nil && !contains(v1alpha1.GPUSharingModes, d.SharingMode) {
			missing = append(missing, fmt.Sprintf("devices[%s].sharingMode", d.ID))
		}
		if in.cc != nil && in.cc.GPUCCMode != "" && !contains(v1alpha1.GPUCCModes, d.CCMode) {
			missing = append(missing, fmt.Sprintf("devices[%s].ccMode", d.ID))
		}
	}
	if t := s.TEE; t != nil && in.needsTEE {
		if !contains(v1alpha1.TEETypes, t.Type) {
			missing = append(missing, "tee.type")
		}
		if in.refused(t) {
			// Evidence that failed verification has no facts to lack: the
			// failure itself decides (ATTESTATION_FAILED).
			return missing
		}
		if (len(in.cc.AllowedMeasurements) > 0 || len(in.cc.ReferenceValues) > 0) && t.Measurement == "" {
			missing = append(missing, "tee.measurement")
		}
		if in.cc.MinSNPTCB != nil && t.Type == v1alpha1.TEESEVSNP && t.SNPTCB == nil {
			missing = append(missing, "tee.snpTCB")
		}
		if in.cc.MinTDXTCBSVN != "" && t.Type == v1alpha1.TEETDX && t.TDXTCBSVN == "" {
			missing = append(missing, "tee.tdxTCBSVN")
		}
	}
	return missing
}

// mixedDevices is stage 4. A pod gets one of the node's devices and the
// evaluator cannot know which, so devices must agree on every fact a rule
// may judge.
func mixedDevices(devices []v1alpha1.GPUDevice) (finding, bool) {
	if len(devices) < 2 {
		return finding{}, false
	}
	first := &devices[0]
	for i := 1; i < len(devices); i++ {
		d := &devices[i]
		var fact, a, b string
		switch {
		case d.MIGPartitioned() != first.MIGPartitioned():
			mig, whole := first, d
			if d.MIGPartitioned() {
				mig, whole = d, first
			}
			return finding{guard.ReasonMixedPool, fmt.Sprintf(
				"the node's devices disagree on MIG: %s is MIG-partitioned, %s is not", quote(mig.ID), quote(whole.ID))}, true
		case d.SliceSharing() != first.SliceSharing():
			fact, a, b = "sharingMode", string(first.SharingMode), string(d.SharingMode)
		case d.MIGProfile != first.MIGProfile:
			fact, a, b = "migProfile", first.MIGProfile, d.MIGProfile
		case d.CCMode != first.CCMode:
			fact, a, b = "ccMode", string(first.CCMode), string(d.CCMode)
		default:
			continue
		}
		return finding{guard.ReasonMixedPool, fmt.Sprintf(
			"the node's devices disagree on %s: %s has %s, %s has %s", fact, quote(first.ID), quote(a), quote(d.ID), quote(b))}, true
	}
	return finding{}, false
}
