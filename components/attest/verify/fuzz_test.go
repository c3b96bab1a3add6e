package verify

import (
	"bytes"
	"testing"

	"github.com/google/go-sev-guest/abi"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// The fuzz targets call verify, not Verify, so that a panic in the
// libraries is a failure here rather than a refusal.

// FuzzVerifySNP mutates a lab report that verifies and go-sev-guest's real
// report (refused for its debug policy). Verification never panics, and a
// mutated input never gets past the signature check: anything but
// QUOTE_INVALID must carry the very report and VCEK of a seed.
func FuzzVerifySNP(f *testing.F) {
	labEv := labEvidence(f)
	realEv := realSNP(f)
	seeds := map[string]*evidence.SNPCerts{}
	for _, ev := range [][]byte{labEv, realEv} {
		f.Add(ev)
		report, vcek := snpSigned(f, ev)
		seeds[string(report)] = &evidence.SNPCerts{VCEK: vcek}
	}
	v := labVerifier(f)
	labReq := snpRequest(nil, guard.ProfileLab)
	realReq := realSNPRequest(nil)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, req := range []Request{labReq, realReq} {
			req.Evidence = raw
			_, err := v.verify(req)
			if reason, _ := ReasonOf(err); err != nil && reason == guard.ReasonQuoteInvalid {
				continue
			}
			report, vcek := snpSigned(t, raw)
			if seed, ok := seeds[string(report)]; !ok || !bytes.Equal(seed.VCEK, vcek) {
				t.Fatalf("a mutated input got past the signature check: %v", err)
			}
		}
	})
}

// snpSigned returns the report and VCEK certificate of evidence that
// decodes.
func snpSigned(t testing.TB, raw []byte) (report, vcek []byte) {
	t.Helper()
	att, err := evidence.DecodeSNP(raw)
	if err != nil {
		t.Fatalf("evidence the verifier accepted does not decode: %v", err)
	}
	report, err = abi.ReportToAbiBytes(att.GetReport())
	if err != nil {
		t.Fatal(err)
	}
	return report, att.GetCertificateChain().GetVcekCert()
}

// FuzzVerifyTDX mutates go-tdx-guest's real quote, which verifies up to
// Intel's TCB rating (TCB_OUT_OF_DATE). Verification never panics, and a
// mutated input never gets past the signature check.
func FuzzVerifyTDX(f *testing.F) {
	seed := realTDX(f)
	f.Add(seed)
	v := tdxVerifier(f, tdxNow)
	req := tdxRequest(seed)
	f.Fuzz(func(t *testing.T, raw []byte) {
		req := req
		req.Evidence = raw
		_, err := v.verify(req)
		if reason, _ := ReasonOf(err); err != nil && reason == guard.ReasonQuoteInvalid {
			return
		}
		// Decoding accepts only the canonical form, so getting further means
		// being the seed.
		if !bytes.Equal(raw, seed) {
			t.Fatalf("a mutated input got past the signature check: %v", err)
		}
	})
}
