package evaluate

import (
	"fmt"
	"strconv"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// sharingReasons gives each sharing mode its own reason, so that an
// operator sees which mode is refused without reading the message.
var sharingReasons = map[v1alpha1.GPUSharingMode]guard.Reason{
	v1alpha1.SharingExclusive:   guard.ReasonExclusiveForbidden,
	v1alpha1.SharingMIG:         guard.ReasonMIGForbidden,
	v1alpha1.SharingMPS:         guard.ReasonMPSForbidden,
	v1alpha1.SharingTimeSlicing: guard.ReasonTimeSlicingForbidden,
}

// content is stage 5: what the admissible, consistent evidence shows. The
// devices agree by now, so the first one speaks for all.
func (in *input) content(s *v1alpha1.NodeSecurityStateSpec) []finding {
	var findings []finding
	if len(s.Devices) > 0 {
		d := &s.Devices[0]
		findings = in.sharingFindings(findings, d, len(s.Devices))
		if in.cc != nil && in.cc.GPUCCMode != "" && d.CCMode != in.cc.GPUCCMode {
			findings = append(findings, finding{guard.ReasonCCModeMismatch, fmt.Sprintf(
				"the node's GPUs are in CC mode %s, policy %s requires %s", d.CCMode, in.policyQ, in.cc.GPUCCMode)})
		}
	}
	if in.needsTEE {
		findings = append(findings, in.tee(s.TEE)...)
	}
	return findings
}

// sharingFindings judges each sharing mode that applies to the devices on
// its own: MIG when they are partitioned, and how they, or their MIG
// slices, are shared. Exclusive slices add nothing to MIG, which alone
// means one container per slice; so the older sharingMode MIG, and
// policies that allow MIG but not Exclusive, keep their meaning.
func (in *input) sharingFindings(findings []finding, d *v1alpha1.GPUDevice, devices int) []finding {
	mode := d.SliceSharing()
	if d.MIGPartitioned() {
		if f, ok := in.sharingFinding(v1alpha1.SharingMIG, devices); !ok {
			findings = append(findings, f)
		}
		if mode == v1alpha1.SharingExclusive {
			return findings
		}
	}
	if f, ok := in.sharingFinding(mode, devices); !ok {
		findings = append(findings, f)
	}
	return findings
}

// sharingMode judges one sharing mode of the node's devices against the
// policy's allowed and forbidden modes.
func (in *input) sharingMode(mode v1alpha1.GPUSharingMode, devices int) (finding, bool) {
	if in.sharing == nil {
		return finding{}, true
	}
	var why string
	switch {
	case contains(in.sharing.ForbiddenModes, mode):
		why = "forbids it"
	case len(in.sharing.AllowedModes) > 0 && !contains(in.sharing.AllowedModes, mode):
		why = "allows only " + quoteList(in.sharing.AllowedModes)
	default:
		return finding{}, true
	}
	return finding{sharingReasons[mode], "the node's " + strconv.Itoa(devices) + " GPU(s) are shared by " +
		string(mode) + " and policy " + in.policyQ + " " + why}, false
}

// tee judges the node's TEE against every confidential-computing rule that
// needs one.
func (in *input) tee(t *v1alpha1.TEEFacts) []finding {
	cc := in.cc
	if t == nil {
		return []finding{{guard.ReasonTEEMissing, fmt.Sprintf(
			"policy %s requires a TEE and the node runs in none", in.policyQ)}}
	}
	var findings []finding
	if len(cc.TEETypes) > 0 && !contains(cc.TEETypes, t.Type) {
		findings = append(findings, finding{guard.ReasonTEETypeNotAllowed, fmt.Sprintf(
			"the node's TEE is %s, policy %s allows %s", t.Type, in.policyQ, quoteList(cc.TEETypes))})
	}
	if len(cc.AllowedMeasurements) > 0 && !contains(cc.AllowedMeasurements, t.Measurement) {
		findings = append(findings, finding{guard.ReasonMeasurementNotAllowed, fmt.Sprintf(
			"launch measurement %s is not in the %d measurement(s) policy %s allows",
			quote(string(t.Measurement)), len(cc.AllowedMeasurements), in.policyQ)})
	}
	if cc.RequireAttestation {
		if f, ok := in.attestation(t.Attestation); !ok {
			findings = append(findings, f)
		}
	}
	return findings
}

func (in *input) attestation(a *v1alpha1.Attestation) (finding, bool) {
	switch {
	case a == nil || (a.Verdict != v1alpha1.AttestationPassed && a.Verdict != v1alpha1.AttestationFailed):
		return finding{guard.ReasonAttestationMissing, fmt.Sprintf(
			"policy %s requires attestation and the evidence has no verdict", in.policyQ)}, false
	case a.Verdict == v1alpha1.AttestationFailed:
		return finding{guard.ReasonAttestationFailed, fmt.Sprintf(
			"attestation by %s failed at %s", quote(a.Verifier), a.VerifiedAt.UTC().Format("2006-01-02T15:04:05Z"))}, false
	case a.VerifiedAt.IsZero():
		return finding{guard.ReasonAttestationStale, "the attestation verdict has no time"}, false
	}
	elapsed := in.now.Sub(a.VerifiedAt.Time)
	switch {
	case elapsed > in.maxAttestAge:
		return finding{guard.ReasonAttestationStale, fmt.Sprintf(
			"the attestation passed %s ago, more than maxAttestationAge %s", age(elapsed), in.maxAttestAge)}, false
	case -elapsed > in.skew:
		return finding{guard.ReasonClockSkew, fmt.Sprintf(
			"the attestation's verifiedAt lies %s in the future", age(-elapsed))}, false
	}
	return finding{}, true
}
