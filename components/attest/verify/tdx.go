package verify

import (
	"bytes"
	"encoding/hex"
	"strings"
	"time"

	tpb "github.com/google/go-tdx-guest/proto/tdx"
	"github.com/google/go-tdx-guest/validate"
	tdxverify "github.com/google/go-tdx-guest/verify"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// tdAttributesDebug is TD_ATTRIBUTES bit 0 (TUD.DEBUG): the TD runs in
// debug mode and the host can read and write its state.
const tdAttributesDebug = 1 << 0

// tcbStatusFailure is how go-tdx-guest words a failed TCB status check,
// for the TD's platform (TCB info) and for the quoting enclave (QE
// identity) alike. The library has no error values for them; a test pins
// the wording against the shipped collateral.
const tcbStatusFailure = "failed TCB status check"

func (v *Verifier) verifyTDX(req *Request, now time.Time) (*Result, error) {
	quote, err := evidence.DecodeTDX(req.Evidence)
	if err != nil {
		return nil, fail(guard.ReasonQuoteInvalid, "decoding the TDX quote: %w", err)
	}
	// First the quote alone: its signature, the QE report and the PCK
	// chain to Intel's root. Collateral comes last, after every local check.
	if err := tdxverify.TdxQuote(quote, &tdxverify.Options{Now: now, TrustedRoots: v.intel}); err != nil {
		return nil, fail(guard.ReasonQuoteInvalid, "the quote does not verify: %w", err)
	}
	got, err := checkTDXClaims(quote, req, now)
	if err != nil {
		return nil, rooted(err, RootIntel)
	}
	if err := v.checkTDXCollateral(quote, now); err != nil {
		return nil, rooted(err, RootIntel)
	}
	body := quote.GetTdQuoteBody()
	return &Result{
		TEE:         v1alpha1.TEETDX,
		Measurement: got,
		HostData:    bytes.Clone(body.GetMrConfigId()),
		TDXTCBSVN:   bytes.Clone(body.GetTeeTcbSvn()),
		Root:        RootIntel,
		Profile:     req.Profile,
		VerifiedAt:  now,
	}, nil
}

// checkTDXClaims checks what a verified quote says against the request: the
// fixed attribute bits, the nonce, debug mode, the minimum TCB and the
// reference values. It returns the measurement.
func checkTDXClaims(quote *tpb.QuoteV4, req *Request, now time.Time) (v1alpha1.Measurement, error) {
	body := quote.GetTdQuoteBody()
	// Validation with no expectations checks the fixed bits of XFAM and
	// TD_ATTRIBUTES.
	if err := validate.TdxQuote(quote, &validate.Options{}); err != nil {
		return "", fail(guard.ReasonQuoteInvalid, "%w", err)
	}
	if err := validate.TdxQuote(quote, &validate.Options{TdQuoteBodyOptions: validate.TdQuoteBodyOptions{ReportData: req.Nonce[:]}}); err != nil {
		return "", fail(guard.ReasonNonceMismatch, "REPORTDATA is not the challenge's nonce")
	}
	if body.GetTdAttributes()[0]&tdAttributesDebug != 0 {
		return "", fail(guard.ReasonDebugPolicy, "TD_ATTRIBUTES %x has DEBUG set", body.GetTdAttributes())
	}
	if floor := req.References.MinTDXTCBSVN; len(floor) > 0 {
		if err := validate.TdxQuote(quote, &validate.Options{TdQuoteBodyOptions: validate.TdQuoteBodyOptions{MinimumTeeTcbSvn: floor}}); err != nil {
			return "", fail(guard.ReasonTCBOutOfDate, "TEE_TCB_SVN %x is below the minimum %x", body.GetTeeTcbSvn(), floor)
		}
	}
	got := measurement(body.GetMrTd())
	if err := matchReferences(req.References.Measurements, v1alpha1.TEETDX, got, now, func(ref Reference) bool {
		mrtd, _ := hex.DecodeString(string(ref.Measurement[len("sha384:"):]))
		opts := validate.TdQuoteBodyOptions{MrTd: mrtd, MrConfigID: ref.HostData}
		return validate.TdxQuote(quote, &validate.Options{TdQuoteBodyOptions: opts}) == nil
	}); err != nil {
		return "", err
	}
	return got, nil
}

// checkTDXCollateral verifies the quote again with Intel's collateral: the
// TCB info and QE identity, signed by Intel and unexpired, must match the
// platform and rate its TCB and its quoting enclave up to date, and
// neither the PCK certificate nor its CA may be revoked.
func (v *Verifier) checkTDXCollateral(quote *tpb.QuoteV4, now time.Time) error {
	if v.collateral == nil {
		return fail(guard.ReasonQuoteInvalid, "no TDX collateral source is configured, so the platform's TCB cannot be rated")
	}
	err := tdxverify.TdxQuote(quote, &tdxverify.Options{
		Now:              now,
		TrustedRoots:     v.intel,
		GetCollateral:    true,
		CheckRevocations: true,
		Getter:           v.collateral,
	})
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), tcbStatusFailure):
		return fail(guard.ReasonTCBOutOfDate, "Intel's collateral does not rate the platform up to date: %w", err)
	default:
		return fail(guard.ReasonQuoteInvalid, "Intel's collateral does not verify: %w", err)
	}
}
