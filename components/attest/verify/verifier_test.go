package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestNewRefusesABadLabRoot(t *testing.T) {
	lab, other := chains(t)
	cases := map[string][]byte{
		"empty":               {},
		"ARK before ASK":      append(lab.RootPEM()[len(lab.RootPEM())/2:], lab.RootPEM()[:len(lab.RootPEM())/2]...),
		"ASK of another root": append(other.RootPEM()[:len(other.RootPEM())/2], lab.RootPEM()[len(lab.RootPEM())/2:]...),
		"not PEM":             []byte("ARK"),
	}
	for name, root := range cases {
		if _, err := New(Options{LabSNPRoot: root}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAMDRoots(t *testing.T) {
	roots, err := amdRoots()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Milan", "Genoa", "Turin"} {
		r, ok := roots[line]
		if !ok {
			t.Fatalf("no %s root", line)
		}
		pc := r.certs.ProductCerts
		if pc.Ark.Subject.CommonName != "ARK-"+line || pc.Ask.Subject.CommonName != "SEV-"+line || pc.Asvk.Subject.CommonName != "SEV-VLEK-"+line {
			t.Errorf("%s roots are %q, %q, %q", line, pc.Ark.Subject.CommonName, pc.Ask.Subject.CommonName, pc.Asvk.Subject.CommonName)
		}
		if r.kind != RootAMD {
			t.Errorf("%s root is of kind %s", line, r.kind)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	lab, _ := chains(t)
	v := labVerifier(t)
	ev := sign(t, lab, labReport())
	cases := []struct {
		name string
		edit func(*Request)
	}{
		{"unknown profile", func(r *Request) { r.Profile = "staging" }},
		{"SGX", func(r *Request) { r.TEE = v1alpha1.TEESGX }},
		{"sha256 reference", func(r *Request) {
			r.References.Measurements[0].Measurement = v1alpha1.Measurement("sha256:" + fmt.Sprintf("%064x", 0))
		}},
		{"uppercase reference", func(r *Request) {
			r.References.Measurements[0].Measurement = v1alpha1.Measurement("sha384:" + fmt.Sprintf("%096X", 10))
		}},
		{"short host data", func(r *Request) { r.References.Measurements[0].HostData = []byte{1} }},
		{"reference without TEE", func(r *Request) { r.References.Measurements[0].TEE = "" }},
		{"short TEE_TCB_SVN", func(r *Request) { r.References.MinTDXTCBSVN = []byte{1, 2} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := snpRequest(ev, guard.ProfileLab)
			tc.edit(&req)
			_, err := v.Verify(req)
			if err == nil {
				t.Fatal("verified")
			}
			if reason, ok := ReasonOf(err); ok {
				t.Errorf("a malformed request got reason %s", reason)
			}
		})
	}
}

func TestMaxChallengeAge(t *testing.T) {
	lab, _ := chains(t)
	v := newVerifier(t, labNow, Options{LabSNPRoot: lab.RootPEM(), MaxChallengeAge: 30 * time.Second})
	req := snpRequest(sign(t, lab, labReport()), guard.ProfileLab)
	req.ChallengedAt = labNow.Add(-31 * time.Second)
	_, err := v.Verify(req)
	wantReason(t, err, guard.ReasonAttestationStale)
	req.ChallengedAt = labNow.Add(-29 * time.Second)
	if _, err := v.Verify(req); err != nil {
		t.Error(err)
	}
}

func TestReasonOf(t *testing.T) {
	err := fmt.Errorf("attesting node-1: %w", fail(guard.ReasonNonceMismatch, "x"))
	if r, ok := ReasonOf(err); !ok || r != guard.ReasonNonceMismatch {
		t.Errorf("ReasonOf(wrapped) = %s, %v", r, ok)
	}
	if _, ok := ReasonOf(fmt.Errorf("plain")); ok {
		t.Error("a plain error has a reason")
	}
}

// TestReasonsAreTheAttestationReasons keeps the verifier to the codes
// documented for it: every reason its code names is in
// guard.AttestationReasons.
func TestReasonsAreTheAttestationReasons(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	use := regexp.MustCompile(`guard\.(Reason[A-Za-z]+)`)
	known := map[string]bool{}
	for _, r := range guard.AttestationReasons {
		known[string(r)] = true
	}
	constant := map[string]guard.Reason{
		"ReasonAttestationStale": guard.ReasonAttestationStale, "ReasonQuoteInvalid": guard.ReasonQuoteInvalid,
		"ReasonTestRootOfTrust": guard.ReasonTestRootOfTrust, "ReasonNonceMismatch": guard.ReasonNonceMismatch,
		"ReasonDebugPolicy": guard.ReasonDebugPolicy, "ReasonTCBOutOfDate": guard.ReasonTCBOutOfDate,
		"ReasonMeasurementNotAllowed": guard.ReasonMeasurementNotAllowed, "ReasonMeasurementExpired": guard.ReasonMeasurementExpired,
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range use.FindAllStringSubmatch(string(src), -1) {
			r, ok := constant[m[1]]
			if !ok || !known[string(r)] {
				t.Errorf("%s uses guard.%s, which is not an attestation reason", f, m[1])
			}
		}
	}
}
