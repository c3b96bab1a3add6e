package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// Sizes of the fields reference values compare.
const (
	// MeasurementSize is the size of a launch measurement, SHA-384 for
	// both SEV-SNP (MEASUREMENT) and TDX (MRTD).
	MeasurementSize = 48
	// SNPHostDataSize is the size of SEV-SNP HOST_DATA.
	SNPHostDataSize = 32
	// TDXConfigIDSize is the size of TDX MRCONFIGID.
	TDXConfigIDSize = 48
	// TDXTCBSVNSize is the size of TDX TEE_TCB_SVN.
	TDXTCBSVNSize = 16
)

// Request is one piece of evidence to appraise.
type Request struct {
	// TEE is the kind of evidence: SEV-SNP or TDX.
	TEE v1alpha1.TEEType
	// Evidence is what the attester sent, in the format of package
	// evidence.
	Evidence []byte
	// Nonce is the report data the evidence must carry:
	// nonce.For(node UID, incarnation, challenge).
	Nonce [nonce.Size]byte
	// ChallengedAt is when the challenge was issued. Evidence answering a
	// challenge older than the verifier's MaxChallengeAge, or of unknown
	// age, is stale.
	ChallengedAt time.Time
	// Profile is production or lab.
	Profile guard.Profile
	// References are the values the evidence is appraised against.
	References References
}

// References are the reference values of RFC 9334: what a trustworthy node
// measures and runs on.
type References struct {
	// Measurements are the allowed launch measurements. None allows none.
	Measurements []Reference
	// MinSNPTCB is the lowest SEV-SNP REPORTED_TCB accepted, level by
	// level; zero accepts any.
	MinSNPTCB evidence.SNPTCB
	// MinTDXTCBSVN is the lowest TDX TEE_TCB_SVN accepted, component by
	// component; nil accepts any (Intel's collateral still applies).
	MinTDXTCBSVN []byte
}

// Reference is one allowed launch measurement.
type Reference struct {
	// TEE is the kind of evidence the reference is for.
	TEE v1alpha1.TEEType
	// Measurement is the SEV-SNP MEASUREMENT or TDX MRTD, sha384:<hex>.
	Measurement v1alpha1.Measurement
	// HostData, when set, must equal the SEV-SNP HOST_DATA (32 bytes) or
	// TDX MRCONFIGID (48 bytes) too.
	HostData []byte
	// NotAfter, when set, is the last instant the reference allows the
	// measurement (MEASUREMENT_EXPIRED after it).
	NotAfter time.Time
}

// Root names the root of trust a verified result rests on.
type Root string

const (
	// RootAMD is one of AMD's SEV-SNP roots (ARK) for a product line.
	RootAMD Root = "amd"
	// RootIntel is Intel's SGX root CA.
	RootIntel Root = "intel"
	// RootLab is the lab SEV-SNP root; only the lab profile trusts it.
	RootLab Root = "lab"
)

// Result is what verified evidence proves.
type Result struct {
	// TEE is the kind of evidence.
	TEE v1alpha1.TEEType
	// Measurement is the launch measurement (SEV-SNP MEASUREMENT, TDX
	// MRTD).
	Measurement v1alpha1.Measurement
	// HostData is the SEV-SNP HOST_DATA or the TDX MRCONFIGID.
	HostData []byte
	// SNPTCB is the SEV-SNP REPORTED_TCB; zero for TDX.
	SNPTCB evidence.SNPTCB
	// TDXTCBSVN is the TDX TEE_TCB_SVN; nil for SEV-SNP.
	TDXTCBSVN []byte
	// ChipID is the SEV-SNP CHIP_ID, nil when the host masks it or for TDX.
	ChipID []byte
	// Root is the root of trust the evidence chains to.
	Root Root
	// Profile is the profile it was verified under.
	Profile guard.Profile
	// VerifiedAt is the verifier's clock when it reached the result.
	VerifiedAt time.Time
}

// measurement writes a 48-byte digest as a Measurement.
func measurement(digest []byte) v1alpha1.Measurement {
	return v1alpha1.Measurement("sha384:" + hex.EncodeToString(digest))
}

// validate checks what the caller controls, so that a malformed request is
// told apart from evidence that fails.
func (r *Request) validate() error {
	if !r.Profile.IsValid() {
		return fmt.Errorf("unknown profile %q", r.Profile)
	}
	if r.TEE != v1alpha1.TEESEVSNP && r.TEE != v1alpha1.TEETDX {
		return fmt.Errorf("unsupported TEE type %q", r.TEE)
	}
	if len(r.References.MinTDXTCBSVN) != 0 && len(r.References.MinTDXTCBSVN) != TDXTCBSVNSize {
		return fmt.Errorf("minimum TEE_TCB_SVN is %d bytes, want %d", len(r.References.MinTDXTCBSVN), TDXTCBSVNSize)
	}
	var errs []error
	for i, ref := range r.References.Measurements {
		if err := ref.validate(); err != nil {
			errs = append(errs, fmt.Errorf("reference %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (ref *Reference) validate() error {
	digest, ok := strings.CutPrefix(string(ref.Measurement), "sha384:")
	if b, err := hex.DecodeString(digest); !ok || err != nil || len(b) != MeasurementSize || digest != strings.ToLower(digest) {
		return fmt.Errorf("measurement %q is not sha384:<96 lowercase hex digits>", ref.Measurement)
	}
	switch ref.TEE {
	case v1alpha1.TEESEVSNP:
		if len(ref.HostData) != 0 && len(ref.HostData) != SNPHostDataSize {
			return fmt.Errorf("HOST_DATA is %d bytes, want %d", len(ref.HostData), SNPHostDataSize)
		}
	case v1alpha1.TEETDX:
		if len(ref.HostData) != 0 && len(ref.HostData) != TDXConfigIDSize {
			return fmt.Errorf("MRCONFIGID is %d bytes, want %d", len(ref.HostData), TDXConfigIDSize)
		}
	default:
		return fmt.Errorf("unsupported TEE type %q", ref.TEE)
	}
	return nil
}
