package verify

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-sev-guest/abi"
	sevtestdata "github.com/google/go-sev-guest/verify/testdata"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

// Offsets in SEV-SNP evidence (the report comes first).
const (
	snpPolicy      = 0x08
	snpMeasurement = 0x90
	snpSignature   = 0x2A0
)

func TestSNPLabVerifies(t *testing.T) {
	lab, _ := chains(t)
	v := labVerifier(t)
	res, err := v.Verify(snpRequest(sign(t, lab, labReport()), guard.ProfileLab))
	if err != nil {
		t.Fatal(err)
	}
	want := &Result{
		TEE:         v1alpha1.TEESEVSNP,
		Measurement: measurement(workload[:]),
		HostData:    hostData,
		SNPTCB:      labTCB,
		ChipID:      lab.ChipID[:],
		Root:        RootLab,
		Profile:     guard.ProfileLab,
		VerifiedAt:  labNow,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestSNPFailures(t *testing.T) {
	lab, other := chains(t)
	good := sign(t, lab, labReport())

	debug := labReport()
	debug.Policy = labtee.DefaultPolicy | labtee.PolicyDebug
	older := labTCB
	older.SNP--
	rolledBack, err := lab.AtTCB(older, installedAt)
	if err != nil {
		t.Fatal(err)
	}
	// The same VCEK key, certified for another TCB than the report states.
	otherTCBCert := func() []byte {
		att, _ := evidence.DecodeSNP(good)
		raw, _ := abi.ReportToAbiBytes(att.GetReport())
		ev, _ := evidence.EncodeSNP(raw, evidence.SNPCerts{ARK: lab.ARK.Raw, ASK: lab.ASK.Raw, VCEK: rolledBack.VCEK.Raw})
		return ev
	}()
	// Another chain's ARK and ASK next to this chain's VCEK.
	foreignRoot := func() []byte {
		att, _ := evidence.DecodeSNP(good)
		raw, _ := abi.ReportToAbiBytes(att.GetReport())
		ev, _ := evidence.EncodeSNP(raw, evidence.SNPCerts{ARK: other.ARK.Raw, ASK: other.ASK.Raw, VCEK: lab.VCEK.Raw})
		return ev
	}()
	withoutRoots := func() []byte {
		att, _ := evidence.DecodeSNP(good)
		raw, _ := abi.ReportToAbiBytes(att.GetReport())
		ev, _ := evidence.EncodeSNP(raw, evidence.SNPCerts{VCEK: lab.VCEK.Raw})
		return ev
	}()

	cases := []struct {
		name    string
		ev      []byte
		profile guard.Profile
		edit    func(*Request)
		clock   time.Time
		want    guard.Reason // "" for success
	}{
		{name: "lab root under lab", ev: good, want: ""},
		{name: "without ARK and ASK", ev: withoutRoots, want: ""},
		{name: "lab root under production", ev: good, profile: guard.ProfileProduction, want: guard.ReasonTestRootOfTrust},
		{name: "wrong root", ev: sign(t, other, labReport()), want: guard.ReasonQuoteInvalid},
		{name: "another chain's ARK and ASK", ev: foreignRoot, want: guard.ReasonQuoteInvalid},
		{name: "tampered measurement", ev: flip(good, snpMeasurement), want: guard.ReasonQuoteInvalid},
		{name: "flipped signature byte", ev: flip(good, snpSignature+5), want: guard.ReasonQuoteInvalid},
		{name: "flipped VCEK certificate byte", ev: flip(good, len(good)-10), want: guard.ReasonQuoteInvalid},
		{name: "trailing byte", ev: append(bytes.Clone(good), 0), want: guard.ReasonQuoteInvalid},
		{name: "VCEK certified for another TCB", ev: otherTCBCert, want: guard.ReasonQuoteInvalid},
		{name: "VCEK expired", ev: good, clock: installedAt.Add(8 * 365 * 24 * time.Hour), want: guard.ReasonQuoteInvalid},
		{name: "declared TDX", ev: good, edit: func(r *Request) { r.TEE = v1alpha1.TEETDX }, want: guard.ReasonQuoteInvalid},
		{name: "wrong nonce", ev: good, edit: func(r *Request) { r.Nonce[0] ^= 1 }, want: guard.ReasonNonceMismatch},
		{name: "debug bit", ev: sign(t, lab, debug), want: guard.ReasonDebugPolicy},
		{name: "TCB rollback", ev: sign(t, rolledBack, labReport()), want: guard.ReasonTCBOutOfDate},
		{name: "TCB rollback allowed by a lower minimum", ev: sign(t, rolledBack, labReport()), edit: func(r *Request) { r.References.MinSNPTCB = older }, want: ""},
		{name: "measurement not allowed", ev: good, edit: func(r *Request) {
			r.References.Measurements[0].Measurement = measurement(make([]byte, MeasurementSize))
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "host data differs", ev: good, edit: func(r *Request) {
			r.References.Measurements[0].HostData = make([]byte, SNPHostDataSize)
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "reference for TDX only", ev: good, edit: func(r *Request) {
			r.References.Measurements[0].TEE = v1alpha1.TEETDX
			r.References.Measurements[0].HostData = nil
		}, want: guard.ReasonMeasurementNotAllowed},
		{name: "no references", ev: good, edit: func(r *Request) { r.References.Measurements = nil }, want: guard.ReasonMeasurementNotAllowed},
		{name: "expired reference", ev: good, edit: func(r *Request) {
			r.References.Measurements[0].NotAfter = labNow.Add(-time.Second)
		}, want: guard.ReasonMeasurementExpired},
		{name: "expired and current references", ev: good, edit: func(r *Request) {
			current := r.References.Measurements[0]
			r.References.Measurements[0].NotAfter = labNow.Add(-time.Second)
			current.NotAfter = labNow.Add(time.Hour)
			r.References.Measurements = append(r.References.Measurements, current)
		}, want: ""},
		{name: "stale challenge", ev: good, edit: func(r *Request) { r.ChallengedAt = labNow.Add(-DefaultMaxChallengeAge - time.Second) }, want: guard.ReasonAttestationStale},
		{name: "challenge from the future", ev: good, edit: func(r *Request) { r.ChallengedAt = labNow.Add(time.Minute) }, want: guard.ReasonAttestationStale},
		{name: "challenge time unknown", ev: good, edit: func(r *Request) { r.ChallengedAt = time.Time{} }, want: guard.ReasonAttestationStale},
	}
	v := labVerifier(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			profile := tc.profile
			if profile == "" {
				profile = guard.ProfileLab
			}
			req := snpRequest(tc.ev, profile)
			if tc.edit != nil {
				tc.edit(&req)
			}
			verifier := v
			if !tc.clock.IsZero() {
				lab, _ := chains(t)
				verifier = newVerifier(t, tc.clock, Options{LabSNPRoot: lab.RootPEM()})
				req.ChallengedAt = tc.clock
			}
			res, err := verifier.Verify(req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				if res.Measurement != measurement(workload[:]) {
					t.Errorf("measurement %s", res.Measurement)
				}
				return
			}
			if res != nil {
				t.Errorf("a result came with the failure: %+v", res)
			}
			wantReason(t, err, tc.want)
		})
	}
}

func TestSNPLabRootNeedsConfiguring(t *testing.T) {
	lab, _ := chains(t)
	v := newVerifier(t, labNow, Options{})
	for _, profile := range []guard.Profile{guard.ProfileLab, guard.ProfileProduction} {
		_, err := v.Verify(snpRequest(sign(t, lab, labReport()), profile))
		wantReason(t, err, guard.ReasonQuoteInvalid)
	}
}

// TestSNPRealReport runs go-sev-guest's real Milan report through the
// production profile: it chains to AMD's Milan root, and is refused only
// because its guest policy allows debugging.
func TestSNPRealReport(t *testing.T) {
	ev := realSNP(t)
	vcekOnly, err := evidence.EncodeSNP(sevtestdata.AttestationBytes, evidence.SNPCerts{VCEK: sevtestdata.VcekBytes})
	if err != nil {
		t.Fatal(err)
	}
	lab, _ := chains(t)
	v := newVerifier(t, labNow, Options{LabSNPRoot: lab.RootPEM()})
	cases := []struct {
		name string
		ev   []byte
		edit func(*Request)
		want guard.Reason
	}{
		{"with AMD's ARK and ASK", ev, nil, guard.ReasonDebugPolicy},
		{"with the VCEK alone", vcekOnly, nil, guard.ReasonDebugPolicy},
		{"under the lab profile", ev, func(r *Request) { r.Profile = guard.ProfileLab }, guard.ReasonDebugPolicy},
		{"wrong nonce", ev, func(r *Request) { r.Nonce[63] ^= 1 }, guard.ReasonNonceMismatch},
		{"tampered measurement", flip(ev, snpMeasurement+47), nil, guard.ReasonQuoteInvalid},
		{"debug bit cleared", func() []byte {
			b := bytes.Clone(ev)
			b[snpPolicy+2] &^= 1 << (19 - 16) // GUEST_POLICY bit 19
			return b
		}(), nil, guard.ReasonQuoteInvalid},
		{"flipped signature byte", flip(ev, snpSignature), nil, guard.ReasonQuoteInvalid},
		{"lab ARK and ASK", func() []byte {
			b, _ := evidence.EncodeSNP(sevtestdata.AttestationBytes, evidence.SNPCerts{ARK: lab.ARK.Raw, ASK: lab.ASK.Raw, VCEK: sevtestdata.VcekBytes})
			return b
		}(), nil, guard.ReasonQuoteInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := realSNPRequest(tc.ev)
			if tc.edit != nil {
				tc.edit(&req)
			}
			_, err := v.Verify(req)
			wantReason(t, err, tc.want)
		})
	}
	// Before the VCEK certificate was issued, nothing verifies.
	early := newVerifier(t, time.Date(2022, time.January, 1, 0, 0, 0, 0, time.UTC), Options{})
	req := realSNPRequest(ev)
	req.ChallengedAt = time.Date(2022, time.January, 1, 0, 0, 0, 0, time.UTC)
	_, err = early.Verify(req)
	wantReason(t, err, guard.ReasonQuoteInvalid)
}
