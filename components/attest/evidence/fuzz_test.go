package evidence_test

import (
	"bytes"
	"testing"

	"github.com/google/go-sev-guest/abi"
	tdxabi "github.com/google/go-tdx-guest/abi"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// FuzzDecodeSNP: decoding never panics, and what it accepts encodes back
// to the same bytes, so no accepted byte escapes the verifier's checks.
func FuzzDecodeSNP(f *testing.F) {
	f.Add(realSNP(f))
	f.Add(labSNP(f))
	f.Add(bytes.Clone(abiReport()))
	f.Fuzz(func(t *testing.T, raw []byte) {
		att, err := evidence.DecodeSNP(raw)
		if err != nil {
			return
		}
		report, err := abi.ReportToAbiBytes(att.GetReport())
		if err != nil {
			t.Fatalf("an accepted report does not encode: %v", err)
		}
		chain := att.GetCertificateChain()
		again, err := evidence.EncodeSNP(report, evidence.SNPCerts{
			ARK: chain.GetArkCert(), ASK: chain.GetAskCert(), VCEK: chain.GetVcekCert(), VLEK: chain.GetVlekCert(),
		})
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("accepted evidence does not encode back to itself (err %v)", err)
		}
	})
}

// FuzzDecodeTDX: decoding never panics, and what it accepts encodes back
// to the same bytes.
func FuzzDecodeTDX(f *testing.F) {
	f.Add(realTDX(f))
	f.Fuzz(func(t *testing.T, raw []byte) {
		quote, err := evidence.DecodeTDX(raw)
		if err != nil {
			return
		}
		again, err := tdxabi.QuoteToAbiBytes(quote)
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("an accepted quote does not encode back to itself (err %v)", err)
		}
	})
}

func abiReport() []byte {
	ev, _ := evidence.EncodeSNP(make([]byte, abi.ReportSize), evidence.SNPCerts{})
	return ev
}
