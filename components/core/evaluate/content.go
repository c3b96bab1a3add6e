package evaluate

import (
	"fmt"
	"strconv"
	"time"

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
	if in.refused(t) {
		// The verifier refused the evidence and kept none of its facts.
		f, _ := in.attestation(t.Attestation)
		return []finding{f}
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
	if len(cc.ReferenceValues) > 0 {
		if f, ok := in.reference(t); !ok {
			findings = append(findings, f)
		}
	}
	if f, ok := in.tcb(t); !ok {
		findings = append(findings, f)
	}
	if cc.RequireAttestation {
		if f, ok := in.attestation(t.Attestation); !ok {
			findings = append(findings, f)
		}
	}
	return findings
}

// refused reports whether the policy requires attestation and the
// verifier refused the node's evidence without keeping its facts (any
// refusal but one by reference values: a bad signature, an untrusted
// root, a wrong nonce).
func (in *input) refused(t *v1alpha1.TEEFacts) bool {
	a := t.Attestation
	return in.cc.RequireAttestation && a != nil && a.Verdict == v1alpha1.AttestationFailed && t.Measurement == ""
}

// reference judges the node's measurement and host data against the
// policy's reference values: accepted when a reference matches both and is
// not past its notAfter.
func (in *input) reference(t *v1alpha1.TEEFacts) (finding, bool) {
	var expired *v1alpha1.MeasurementReference
	for i := range in.cc.ReferenceValues {
		r := &in.cc.ReferenceValues[i]
		if r.Measurement != t.Measurement || (r.HostData != "" && r.HostData != t.HostData) {
			continue
		}
		if r.NotAfter == nil || !in.now.After(r.NotAfter.Time) {
			return finding{}, true
		}
		expired = r
	}
	if expired != nil {
		return finding{guard.ReasonMeasurementExpired, fmt.Sprintf(
			"launch measurement %s is accepted by policy %s only until %s",
			quote(string(t.Measurement)), in.policyQ, expired.NotAfter.UTC().Format(time.RFC3339))}, false
	}
	hostData := ""
	if t.HostData != "" {
		hostData = " with host data " + quote(t.HostData)
	}
	return finding{guard.ReasonMeasurementNotAllowed, fmt.Sprintf(
		"launch measurement %s%s matches none of the %d reference value(s) of policy %s",
		quote(string(t.Measurement)), hostData, len(in.cc.ReferenceValues), in.policyQ)}, false
}

// tcb judges the node's platform TCB against the policy's minimum for its
// TEE. Evidence without the TCB is incomplete, which stage 2 reports.
func (in *input) tcb(t *v1alpha1.TEEFacts) (finding, bool) {
	switch {
	case in.cc.MinSNPTCB != nil && t.Type == v1alpha1.TEESEVSNP && t.SNPTCB != nil:
		min, got := in.cc.MinSNPTCB, t.SNPTCB
		if got.BootLoader < min.BootLoader || got.TEE < min.TEE || got.SNP < min.SNP || got.Microcode < min.Microcode {
			return finding{guard.ReasonTCBOutOfDate, fmt.Sprintf(
				"the node's SEV-SNP TCB %s is below the minimum %s of policy %s", snpTCB(got), snpTCB(min), in.policyQ)}, false
		}
	case in.cc.MinTDXTCBSVN != "" && t.Type == v1alpha1.TEETDX && t.TDXTCBSVN != "":
		min, got := in.cc.MinTDXTCBSVN, t.TDXTCBSVN
		// Both are 32 lowercase hex digits (validated), so the bytes
		// compare as their digit pairs do.
		for i := 0; i+2 <= len(min) && i+2 <= len(got); i += 2 {
			if got[i:i+2] < min[i:i+2] {
				return finding{guard.ReasonTCBOutOfDate, fmt.Sprintf(
					"the node's TDX TEE_TCB_SVN %s is below the minimum %s of policy %s in component %d", got, min, in.policyQ, i/2)}, false
			}
		}
	}
	return finding{}, true
}

func snpTCB(t *v1alpha1.SNPTCB) string {
	return fmt.Sprintf("{bootLoader %d, tee %d, snp %d, microcode %d}", t.BootLoader, t.TEE, t.SNP, t.Microcode)
}

func (in *input) attestation(a *v1alpha1.Attestation) (finding, bool) {
	switch {
	case a == nil || (a.Verdict != v1alpha1.AttestationPassed && a.Verdict != v1alpha1.AttestationFailed):
		return finding{guard.ReasonAttestationMissing, fmt.Sprintf(
			"policy %s requires attestation and the evidence has no verdict", in.policyQ)}, false
	case a.Verdict == v1alpha1.AttestationFailed:
		why := ""
		if a.Reason != "" {
			why = ": " + string(a.Reason)
		}
		return finding{guard.ReasonAttestationFailed, fmt.Sprintf(
			"attestation by %s failed at %s%s", quote(a.Verifier), a.VerifiedAt.UTC().Format("2006-01-02T15:04:05Z"), why)}, false
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
