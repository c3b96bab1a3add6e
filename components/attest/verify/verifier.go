package verify

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// DefaultMaxChallengeAge is how long a challenge stays answerable unless
// Options say otherwise.
const DefaultMaxChallengeAge = 5 * time.Minute

// clockSkew is how far in the future a challenge's issue time may lie, as
// the evaluator tolerates for evidence (CLOCK_SKEW).
const clockSkew = 30 * time.Second

// TDXCollateral returns Intel's collateral for TDX quotes: the TCB info,
// the QE identity and the CRLs that Intel's Provisioning Certification
// Service (PCS) serves at the URL asked, with the response headers, which
// carry the issuer chains. A caching proxy or a local PCCS can implement
// it; the verifier itself never opens a connection. go-tdx-guest's
// trust.HTTPSGetter has the same method.
type TDXCollateral interface {
	Get(url string) (header map[string][]string, body []byte, err error)
}

// Options configure a Verifier.
type Options struct {
	// Clock is the verifier's time, for certificate validity, collateral
	// expiry, reference expiry and challenge age; time.Now when nil.
	Clock func() time.Time
	// LabSNPRoot is the lab root of trust in PEM, the ASK then the ARK
	// (labtee.SecretCertChain). The lab profile trusts it besides AMD's
	// roots; the production profile refuses evidence that verifies only
	// against it (TEST_ROOT_OF_TRUST). Optional.
	LabSNPRoot []byte
	// TDXCollateral is where Intel's collateral comes from. Without it TDX
	// evidence is refused, because its TCB cannot be rated.
	TDXCollateral TDXCollateral
	// MaxChallengeAge is the oldest a challenge may be when its evidence is
	// verified; DefaultMaxChallengeAge when zero.
	MaxChallengeAge time.Duration
}

// Verifier appraises evidence. It is safe for concurrent use.
type Verifier struct {
	clock           func() time.Time
	maxChallengeAge time.Duration
	amd             map[string]snpRoot // by product line
	lab             *snpRoot
	intel           *x509.CertPool
	collateral      TDXCollateral
}

// New returns a Verifier.
func New(opts Options) (*Verifier, error) {
	v := &Verifier{
		clock:           opts.Clock,
		maxChallengeAge: opts.MaxChallengeAge,
		collateral:      opts.TDXCollateral,
	}
	if v.clock == nil {
		v.clock = time.Now
	}
	if v.maxChallengeAge <= 0 {
		v.maxChallengeAge = DefaultMaxChallengeAge
	}
	var err error
	if v.amd, err = amdRoots(); err != nil {
		return nil, err
	}
	if v.intel, err = intelRoots(); err != nil {
		return nil, err
	}
	if opts.LabSNPRoot != nil {
		if v.lab, err = labRoot(opts.LabSNPRoot); err != nil {
			return nil, fmt.Errorf("invalid lab SEV-SNP root: %w", err)
		}
	}
	return v, nil
}

// Verify appraises one piece of evidence. It returns the Result, or an
// *Error with the reason code of the first check that failed, or another
// error when the request itself is malformed.
func (v *Verifier) Verify(req Request) (res *Result, err error) {
	// The libraries parse bytes that an attacker controls. Decoding checks
	// every length first, so that they never index out of range; should one
	// panic all the same, the evidence is refused rather than the process
	// brought down.
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fail(guard.ReasonQuoteInvalid, "verifying the evidence failed: %v", p)
		}
	}()
	return v.verify(req)
}

func (v *Verifier) verify(req Request) (*Result, error) {
	if err := req.validate(); err != nil {
		return nil, fmt.Errorf("invalid request: %w", err)
	}
	now := v.clock()
	if err := v.checkChallengeAge(req.ChallengedAt, now); err != nil {
		return nil, err
	}
	switch req.TEE {
	case v1alpha1.TEESEVSNP:
		return v.verifySNP(&req, now)
	default:
		return v.verifyTDX(&req, now)
	}
}

func (v *Verifier) checkChallengeAge(at, now time.Time) error {
	switch age := now.Sub(at); {
	case at.IsZero():
		return fail(guard.ReasonAttestationStale, "the challenge has no issue time")
	case age > v.maxChallengeAge:
		return fail(guard.ReasonAttestationStale, "the challenge was issued %s ago, more than %s", age.Round(time.Second), v.maxChallengeAge)
	case age < -clockSkew:
		return fail(guard.ReasonAttestationStale, "the challenge was issued %s in the future", (-age).Round(time.Second))
	}
	return nil
}

// matchReferences finds the references for tee that match, according to
// matches, and returns MEASUREMENT_NOT_ALLOWED when none does and
// MEASUREMENT_EXPIRED when every one that does has expired.
func matchReferences(refs []Reference, tee v1alpha1.TEEType, got v1alpha1.Measurement, now time.Time, matches func(Reference) bool) error {
	expired := false
	for _, ref := range refs {
		if ref.TEE != tee || !matches(ref) {
			continue
		}
		if !ref.NotAfter.IsZero() && now.After(ref.NotAfter) {
			expired = true
			continue
		}
		return nil
	}
	if expired {
		return fail(guard.ReasonMeasurementExpired, "every reference value that allows measurement %s has expired", got)
	}
	return fail(guard.ReasonMeasurementNotAllowed, "no reference value allows measurement %s with this host data", got)
}
