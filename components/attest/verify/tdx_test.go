package verify

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	tdxtestdata "github.com/google/go-tdx-guest/testing/testdata"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// TestTDXRealQuote runs go-tdx-guest's real quote and collateral at a fixed
// clock. The quote passes every check of its own and against the reference
// values; Intel's collateral then rates its TEE_TCB_SVN (03 00 04 ...)
// below every TCB level it lists (03 00 05 ...), so the platform is out of
// date. That is the wording the verifier matches on (tcbStatusFailure).
func TestTDXRealQuote(t *testing.T) {
	raw := realTDX(t)
	_, err := tdxVerifier(t, tdxNow).Verify(tdxRequest(raw))
	wantReason(t, err, guard.ReasonTCBOutOfDate)
	if !strings.Contains(err.Error(), tcbStatusFailure) || !strings.Contains(err.Error(), "no matching TCB level") {
		t.Errorf("go-tdx-guest words the TCB status failure differently now: %v", err)
	}
}

func TestTDXFailures(t *testing.T) {
	raw := realTDX(t)
	cases := []struct {
		name  string
		raw   []byte
		edit  func(*Request)
		clock time.Time
		opts  *Options
		want  guard.Reason
	}{
		{name: "the library's unsigned trailer", raw: tdxtestdata.RawQuote, want: guard.ReasonQuoteInvalid},
		{name: "flipped signature byte", raw: flip(raw, tdxSignature+7), want: guard.ReasonQuoteInvalid},
		{name: "tampered MRTD", raw: flip(raw, tdxMRTD), want: guard.ReasonQuoteInvalid},
		{name: "tampered REPORTDATA", raw: flip(raw, tdxReportData), want: guard.ReasonQuoteInvalid},
		{name: "flipped PCK certificate byte", raw: flip(raw, len(raw)-100), want: guard.ReasonQuoteInvalid},
		{name: "declared SEV-SNP", raw: raw, edit: func(r *Request) { r.TEE = v1alpha1.TEESEVSNP }, want: guard.ReasonQuoteInvalid},
		{name: "PCK chain expired", raw: raw, clock: time.Date(2053, time.July, 1, 0, 0, 0, 0, time.UTC), want: guard.ReasonQuoteInvalid},
		{name: "collateral expired", raw: raw, clock: time.Date(2023, time.July, 20, 0, 0, 0, 0, time.UTC), want: guard.ReasonQuoteInvalid},
		{name: "no collateral source", raw: raw, opts: &Options{}, want: guard.ReasonQuoteInvalid},
		{name: "collateral unavailable", raw: raw, opts: &Options{TDXCollateral: failingCollateral{}}, want: guard.ReasonQuoteInvalid},
		{name: "wrong nonce", raw: raw, edit: func(r *Request) { r.Nonce[5] ^= 1 }, want: guard.ReasonNonceMismatch},
		{name: "TEE_TCB_SVN below the minimum", raw: raw, edit: func(r *Request) {
			r.References.MinTDXTCBSVN = mustHex("03000500000000000000000000000000")
		}, want: guard.ReasonTCBOutOfDate},
		{name: "TEE_TCB_SVN at the minimum", raw: raw, edit: func(r *Request) {
			r.References.MinTDXTCBSVN = mustHex("03000400000000000000000000000000")
		}, want: guard.ReasonTCBOutOfDate}, // passes, then Intel's collateral refuses
		{name: "MRTD not allowed", raw: raw, edit: func(r *Request) {
			r.References.Measurements[0].Measurement = measurement(make([]byte, MeasurementSize))
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "MRCONFIGID differs", raw: raw, edit: func(r *Request) {
			r.References.Measurements[0].HostData = bytes.Repeat([]byte{1}, TDXConfigIDSize)
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "reference for SEV-SNP only", raw: raw, edit: func(r *Request) {
			r.References.Measurements[0].TEE = v1alpha1.TEESEVSNP
			r.References.Measurements[0].HostData = nil
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "expired reference", raw: raw, edit: func(r *Request) {
			r.References.Measurements[0].NotAfter = tdxNow.Add(-time.Hour)
		}, want: guard.ReasonMeasurementExpired},
		{name: "stale challenge", raw: raw, edit: func(r *Request) { r.ChallengedAt = tdxNow.Add(-time.Hour) }, want: guard.ReasonAttestationStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tdxNow
			if !tc.clock.IsZero() {
				now = tc.clock
			}
			v := tdxVerifier(t, now)
			if tc.opts != nil {
				v = newVerifier(t, now, *tc.opts)
			}
			req := tdxRequest(tc.raw)
			req.ChallengedAt = now.Add(-time.Minute)
			if tc.edit != nil {
				tc.edit(&req)
			}
			res, err := v.Verify(req)
			if res != nil {
				t.Errorf("a result came with the failure: %+v", res)
			}
			wantReason(t, err, tc.want)
		})
	}
}

type failingCollateral struct{}

func (failingCollateral) Get(url string) (map[string][]string, []byte, error) {
	return nil, nil, errors.New("unreachable: " + url)
}

// TestTDXClaims checks a decoded real quote against requests, past its
// signature: no signer makes TDX quotes with other contents, so the
// debug check is shown on the decoded quote with the bit set.
func TestTDXClaims(t *testing.T) {
	raw := realTDX(t)
	req := tdxRequest(raw)
	quote, err := evidence.DecodeTDX(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkTDXClaims(quote, &req, tdxNow)
	if err != nil {
		t.Fatalf("the real quote fails its own claims: %v", err)
	}
	if want := measurement(raw[tdxMRTD : tdxMRTD+MeasurementSize]); got != want {
		t.Errorf("measurement %s, want %s", got, want)
	}
	quote.TdQuoteBody.TdAttributes[0] |= tdAttributesDebug
	_, err = checkTDXClaims(quote, &req, tdxNow)
	wantReason(t, err, guard.ReasonDebugPolicy)
}
