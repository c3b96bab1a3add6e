package labtee

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	sevverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

var (
	installedAt = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	testTCB     = evidence.SNPTCB{BootLoader: 3, TEE: 0, SNP: 8, Microcode: 115}
)

// Two chains serve every test: RSA key generation is the slow part. They
// use 2048-bit keys, for the format is the same; TestDefaultKeySize covers
// 4096.
var (
	chainsOnce sync.Once
	chainA     *Chain
	chainB     *Chain
	chainsErr  error
)

func testChains(t *testing.T) (a, b *Chain) {
	t.Helper()
	chainsOnce.Do(func() {
		opts := Options{TCB: testTCB, Now: installedAt, RSABits: 2048}
		if chainA, chainsErr = New(opts); chainsErr == nil {
			chainB, chainsErr = New(opts)
		}
	})
	if chainsErr != nil {
		t.Fatal(chainsErr)
	}
	return chainA, chainB
}

func newTestChain(t *testing.T) *Chain {
	t.Helper()
	a, _ := testChains(t)
	return a
}

// verifyWithLibrary checks evidence the way go-sev-guest does, trusting
// the chain's root alone, independently of package verify.
func verifyWithLibrary(t *testing.T, c *Chain, ev []byte, now time.Time) error {
	t.Helper()
	att, err := evidence.DecodeSNP(ev)
	if err != nil {
		t.Fatal(err)
	}
	root := trust.AMDRootCertsProduct(c.ProductLine)
	if err := root.FromKDSCertBytes(c.RootPEM()); err != nil {
		t.Fatal(err)
	}
	return sevverify.SnpAttestation(att, &sevverify.Options{
		DisableCertFetching: true,
		Now:                 now,
		TrustedRoots:        map[string][]*trust.AMDRootCerts{c.ProductLine: {root}},
	})
}

func TestChainFormat(t *testing.T) {
	c := newTestChain(t)
	for name, cert := range map[string]*x509.Certificate{"ARK": c.ARK, "ASK": c.ASK, "VCEK": c.VCEK} {
		if cert.SignatureAlgorithm != x509.SHA384WithRSAPSS {
			t.Errorf("%s is signed with %v, want SHA-384 with RSASSA-PSS", name, cert.SignatureAlgorithm)
		}
		if got := cert.Subject.Organization; len(got) != 1 || got[0] != "Advanced Micro Devices" {
			t.Errorf("%s organization is %v", name, got)
		}
	}
	if c.ARK.Subject.CommonName != "ARK-Milan" || c.ASK.Subject.CommonName != "SEV-Milan" || c.VCEK.Subject.CommonName != "SEV-VCEK" {
		t.Errorf("common names %q, %q, %q", c.ARK.Subject.CommonName, c.ASK.Subject.CommonName, c.VCEK.Subject.CommonName)
	}
	if _, ok := c.ASK.PublicKey.(*rsa.PublicKey); !ok {
		t.Errorf("ASK key is %T, want RSA", c.ASK.PublicKey)
	}
	if pub, ok := c.VCEK.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P384() {
		t.Errorf("VCEK key is %T, want ECDSA P-384", c.VCEK.PublicKey)
	}
	exts, err := kds.VcekCertificateExtensions(c.VCEK)
	if err != nil {
		t.Fatal(err)
	}
	if exts.ProductName != "Milan-B1" || !bytes.Equal(exts.HWID, c.ChipID[:]) || evidence.SNPTCBFromVersion(uint64(exts.TCBVersion)) != testTCB {
		t.Errorf("VCEK extensions %+v", exts)
	}
	if c.ChipID == ([abi.ChipIDSize]byte{}) {
		t.Error("chip ID is zero")
	}
}

func TestSignVerifiesWithGoSevGuest(t *testing.T) {
	c := newTestChain(t)
	r := Report{Policy: DefaultPolicy}
	copy(r.Measurement[:], bytes.Repeat([]byte{0xab}, abi.MeasurementSize))
	copy(r.ReportData[:], "nonce")
	ev, err := c.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWithLibrary(t, c, ev, installedAt); err != nil {
		t.Fatalf("go-sev-guest refuses a lab report: %v", err)
	}
	att, _ := evidence.DecodeSNP(ev)
	rep := att.GetReport()
	if !bytes.Equal(rep.GetMeasurement(), r.Measurement[:]) || !bytes.Equal(rep.GetReportData(), r.ReportData[:]) ||
		!bytes.Equal(rep.GetChipId(), c.ChipID[:]) || rep.GetReportedTcb() != testTCB.Version() || rep.GetPolicy() != DefaultPolicy {
		t.Errorf("report fields differ from what was signed: %v", rep)
	}
	if got := kds.ProductLineFromFms(rep.GetCpuid1EaxFms()); got != "Milan" {
		t.Errorf("report CPUID names product line %q", got)
	}

	// Another chain's root does not verify it.
	_, other := testChains(t)
	if err := verifyWithLibrary(t, other, ev, installedAt); err == nil {
		t.Error("another lab root verifies the report")
	}
}

func TestSignRefusesBadPolicy(t *testing.T) {
	c := newTestChain(t)
	if _, err := c.Sign(Report{Policy: PolicySMT}); err == nil {
		t.Error("a policy without the reserved bit was signed")
	}
}

func TestAtTCB(t *testing.T) {
	c := newTestChain(t)
	lower := testTCB
	lower.SNP--
	later := installedAt.Add(24 * time.Hour)
	rolled, err := c.AtTCB(lower, later)
	if err != nil {
		t.Fatal(err)
	}
	if rolled.TCB != lower || c.TCB != testTCB {
		t.Errorf("TCBs are %v and %v", rolled.TCB, c.TCB)
	}
	ev, err := rolled.Sign(Report{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWithLibrary(t, rolled, ev, later); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AtTCB(evidence.SNPTCB{SNP: 200}, later); err == nil {
		t.Error("an SNP level above 127 was accepted")
	}
}

func TestSecretRoundTrip(t *testing.T) {
	c := newTestChain(t)
	data, err := c.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{SecretCertChain, SecretVCEK, SecretVCEKKey, SecretASKKey} {
		if len(data[key]) == 0 {
			t.Errorf("secret has no %s", key)
		}
	}
	if strings.Contains(string(data[SecretCertChain]), "PRIVATE KEY") {
		t.Error("the public cert chain holds a private key")
	}
	back, err := ParseSecretData(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.ProductLine != c.ProductLine || back.ChipID != c.ChipID || back.TCB != c.TCB ||
		!back.ARK.Equal(c.ARK) || !back.ASK.Equal(c.ASK) || !back.VCEK.Equal(c.VCEK) {
		t.Error("the parsed chain differs")
	}
	ev, err := back.Sign(Report{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWithLibrary(t, c, ev, installedAt); err != nil {
		t.Fatal(err)
	}

	// Without the ASK key the chain signs but cannot re-endorse.
	delete(data, SecretASKKey)
	noASK, err := ParseSecretData(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noASK.AtTCB(testTCB, installedAt); err == nil {
		t.Error("a chain without the ASK key endorsed a VCEK")
	}
}

func TestParseSecretDataRefusesMismatches(t *testing.T) {
	a, b := testChains(t)
	da, _ := a.SecretData()
	db, _ := b.SecretData()
	cases := []struct {
		name string
		edit func(map[string][]byte)
	}{
		{"another chain's VCEK", func(d map[string][]byte) { d[SecretVCEK] = db[SecretVCEK] }},
		{"another VCEK key", func(d map[string][]byte) { d[SecretVCEKKey] = db[SecretVCEKKey] }},
		{"another ASK key", func(d map[string][]byte) { d[SecretASKKey] = db[SecretASKKey] }},
		{"ARK before ASK", func(d map[string][]byte) {
			d[SecretCertChain] = append(certPEM(a.ARK), certPEM(a.ASK)...)
		}},
		{"no cert chain", func(d map[string][]byte) { delete(d, SecretCertChain) }},
		{"trailing data", func(d map[string][]byte) { d[SecretVCEK] = append(bytes.Clone(d[SecretVCEK]), "junk"...) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := map[string][]byte{}
			for k, v := range da {
				d[k] = v
			}
			tc.edit(d)
			if _, err := ParseSecretData(d); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(Options{ProductLine: "Naples", RSABits: 2048}); err == nil {
		t.Error("an unsupported product line was accepted")
	}
	c, err := New(Options{ProductLine: "Genoa", Now: installedAt, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.Sign(Report{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWithLibrary(t, c, ev, installedAt); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultKeySize(t *testing.T) {
	c, err := New(Options{Now: installedAt})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ASK.PublicKey.(*rsa.PublicKey).N.BitLen(); got != DefaultRSABits {
		t.Errorf("ASK key has %d bits", got)
	}
	ev, err := c.Sign(Report{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWithLibrary(t, c, ev, installedAt); err != nil {
		t.Fatal(err)
	}
}
