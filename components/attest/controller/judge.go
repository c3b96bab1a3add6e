package controller

import (
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// maxMessage is the longest attestation message the NodeSecurityState
// takes.
const maxMessage = 1024

// authenticated are the reasons the verifier gives after the evidence's
// signature, certificate chain and nonce have verified: the evidence's
// claims are the node's own and current, and only the reference values
// refuse them. Evidence refused for any other reason proves nothing.
var authenticated = map[guard.Reason]bool{
	guard.ReasonDebugPolicy:           true,
	guard.ReasonTCBOutOfDate:          true,
	guard.ReasonMeasurementNotAllowed: true,
	guard.ReasonMeasurementExpired:    true,
}

// judge turns the verifier's answer about ev into the TEE facts of the
// node's evidence, every fact from evidence that verified, and pinned is
// the chip the node UID is bound to ("" for none yet).
//
//   - Verified evidence passes with its facts, unless it comes from
//     another chip than pinned (CHIP_ID_CHANGED).
//   - Evidence refused only by the reference values (debug policy, TCB,
//     measurement) fails with its reason, its facts and its root of
//     trust: they are
//     authenticated and fresh, and the evaluator judges them too (a
//     measurement a policy does not allow is MEASUREMENT_NOT_ALLOWED
//     there as well).
//   - Any other refusal fails with the reason and no facts but the TEE
//     type the attester claimed and the pinned chip.
//
// The EPC size the attester states beside the evidence is kept with the
// facts of verified evidence (the first two cases) only: no signature
// covers it, so it is the word of an attester whose evidence proved to be
// the node's own and current, and of no other.
//
// An error from the verifier without a reason code is about the request,
// not the evidence, and is returned.
func judge(ev *attester.Evidence, res *verify.Result, verr error, pinned string) (*v1alpha1.TEEFacts, error) {
	if verr == nil {
		tee := factsOf(res)
		if msg, ok := sameChip(pinned, tee.ChipID); !ok {
			return chipChanged(ev.TEE, pinned, msg), nil
		}
		tee.Attestation = &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, RootOfTrust: v1alpha1.RootOfTrust(res.Root)}
		tee.EPCSize = epcSize(ev)
		return tee, nil
	}
	reason, ok := verify.ReasonOf(verr)
	if !ok {
		return nil, fmt.Errorf("verifying the evidence: %w", verr)
	}
	failed := &v1alpha1.Attestation{Verdict: v1alpha1.AttestationFailed, Reason: reason, Message: truncate(verr.Error())}
	if authenticated[reason] {
		if claims, err := claimsOf(ev); err == nil {
			tee := factsOf(claims)
			if msg, ok := sameChip(pinned, tee.ChipID); !ok {
				return chipChanged(ev.TEE, pinned, msg), nil
			}
			failed.RootOfTrust = v1alpha1.RootOfTrust(verify.RootOf(verr))
			tee.Attestation = failed
			tee.EPCSize = epcSize(ev)
			return tee, nil
		}
	}
	tee := &v1alpha1.TEEFacts{Type: ev.TEE, Attestation: failed}
	if ev.TEE == v1alpha1.TEESEVSNP {
		tee.ChipID = pinned
	}
	return tee, nil
}

// epcSize is the EPC size the attester stated, in bytes, or nil when it
// stated none.
func epcSize(ev *attester.Evidence) *resource.Quantity {
	if ev.EPCSize <= 0 {
		return nil
	}
	return resource.NewQuantity(ev.EPCSize, resource.BinarySI)
}

// sameChip checks the chip of verified evidence against the node's.
func sameChip(pinned, got string) (string, bool) {
	switch {
	case pinned == "" || got == pinned:
		return "", true
	case got == "":
		return fmt.Sprintf("the evidence masks its chip ID, and the node's evidence is bound to chip %s", short(pinned)), false
	}
	return fmt.Sprintf("the evidence comes from chip %s, and the node's evidence is bound to chip %s; "+
		"delete the NodeSecurityState to accept the new chip", short(got), short(pinned)), false
}

func chipChanged(tee v1alpha1.TEEType, pinned, msg string) *v1alpha1.TEEFacts {
	return &v1alpha1.TEEFacts{Type: tee, ChipID: pinned, Attestation: &v1alpha1.Attestation{
		Verdict: v1alpha1.AttestationFailed, Reason: guard.ReasonChipIDChanged, Message: truncate(string(guard.ReasonChipIDChanged) + ": " + msg)}}
}

// factsOf writes what verified evidence says as TEE facts.
func factsOf(res *verify.Result) *v1alpha1.TEEFacts {
	tee := &v1alpha1.TEEFacts{Type: res.TEE, Measurement: res.Measurement, HostData: hex.EncodeToString(res.HostData)}
	switch res.TEE {
	case v1alpha1.TEESEVSNP:
		t := res.SNPTCB
		tee.SNPTCB = &v1alpha1.SNPTCB{BootLoader: int32(t.BootLoader), TEE: int32(t.TEE), SNP: int32(t.SNP), Microcode: int32(t.Microcode)}
		tee.ChipID = hex.EncodeToString(res.ChipID)
	case v1alpha1.TEETDX:
		tee.TDXTCBSVN = hex.EncodeToString(res.TDXTCBSVN)
	}
	return tee
}

// claimsOf reads what evidence says, as the verifier would report it. It
// is only for evidence whose signature and nonce the verifier accepted.
func claimsOf(ev *attester.Evidence) (*verify.Result, error) {
	switch ev.TEE {
	case v1alpha1.TEESEVSNP:
		att, err := evidence.DecodeSNP(ev.Data)
		if err != nil {
			return nil, err
		}
		r := att.GetReport()
		res := &verify.Result{TEE: ev.TEE, Measurement: sha384(r.GetMeasurement()), HostData: r.GetHostData(),
			SNPTCB: evidence.SNPTCBFromVersion(r.GetReportedTcb())}
		if !allZero(r.GetChipId()) {
			res.ChipID = r.GetChipId()
		}
		return res, nil
	case v1alpha1.TEETDX:
		quote, err := evidence.DecodeTDX(ev.Data)
		if err != nil {
			return nil, err
		}
		body := quote.GetTdQuoteBody()
		return &verify.Result{TEE: ev.TEE, Measurement: sha384(body.GetMrTd()), HostData: body.GetMrConfigId(), TDXTCBSVN: body.GetTeeTcbSvn()}, nil
	}
	return nil, fmt.Errorf("unsupported TEE %q", ev.TEE)
}

func sha384(digest []byte) v1alpha1.Measurement {
	return v1alpha1.Measurement("sha384:" + hex.EncodeToString(digest))
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// short abbreviates a chip ID for messages.
func short(chip string) string {
	if len(chip) > 16 {
		return chip[:16] + "…"
	}
	return chip
}

// truncate shortens a message to what the NodeSecurityState takes.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
