package verify

import (
	"bytes"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	sevtestdata "github.com/google/go-sev-guest/verify/testdata"
	"github.com/google/go-sev-guest/verify/trust"
	tdxtesting "github.com/google/go-tdx-guest/testing"
	tdxtestdata "github.com/google/go-tdx-guest/testing/testdata"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

var (
	// labNow is the lab verifier's clock: a day after the lab chains were
	// installed, and inside the validity of go-sev-guest's real VCEK
	// (2022-09-24 to 2029-09-24).
	labNow      = time.Date(2026, time.March, 2, 12, 0, 0, 0, time.UTC)
	installedAt = labNow.Add(-24 * time.Hour)
	// tdxNow lies inside the validity of go-tdx-guest's collateral: its QE
	// identity expires on 2023-07-08, its TCB info on 2023-07-18.
	tdxNow = time.Date(2023, time.July, 1, 1, 0, 0, 0, time.UTC)

	labTCB       = evidence.SNPTCB{BootLoader: 3, TEE: 0, SNP: 8, Microcode: 115}
	workload     = sha384("workload v1")
	hostData     = bytes.Repeat([]byte{0x42}, SNPHostDataSize)
	testUID      = "6c1f0f4e-1b7a-4c43-9b1e-0d2f3a4b5c6d"
	testBoot     = "boot-8f2c"
	challenge    = []byte("challenge-0123456789abcdef012345")
	testNonce    = nonce.For(testUID, testBoot, challenge)
	challengedAt = labNow.Add(-time.Minute)
)

func sha384(s string) [MeasurementSize]byte { return sha512.Sum384([]byte(s)) }

// chains are the lab chains in ../testdata/labchain, made by labtee: two
// independent roots with the same TCB.
var (
	chainsOnce      sync.Once
	labChain, rogue *labtee.Chain
	chainsErr       error
)

func chains(t testing.TB) (lab, other *labtee.Chain) {
	t.Helper()
	chainsOnce.Do(func() {
		if labChain, chainsErr = labtee.ReadSecretDir("../testdata/labchain/lab"); chainsErr != nil {
			return
		}
		rogue, chainsErr = labtee.ReadSecretDir("../testdata/labchain/rogue")
	})
	if chainsErr != nil {
		t.Fatal(chainsErr)
	}
	if labChain.TCB != labTCB {
		t.Fatalf("the lab chain's TCB is %v, want %v", labChain.TCB, labTCB)
	}
	return labChain, rogue
}

// labReport is what a well-behaved lab guest signs.
func labReport() labtee.Report {
	r := labtee.Report{Measurement: workload, ReportData: testNonce}
	copy(r.HostData[:], hostData)
	return r
}

func sign(t testing.TB, c *labtee.Chain, r labtee.Report) []byte {
	t.Helper()
	ev, err := c.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func newVerifier(t testing.TB, now time.Time, opts Options) *Verifier {
	t.Helper()
	opts.Clock = func() time.Time { return now }
	v, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// labVerifier trusts lab's root.
func labVerifier(t testing.TB) *Verifier {
	lab, _ := chains(t)
	return newVerifier(t, labNow, Options{LabSNPRoot: lab.RootPEM()})
}

func snpRequest(ev []byte, profile guard.Profile) Request {
	return Request{
		TEE:          v1alpha1.TEESEVSNP,
		Evidence:     ev,
		Nonce:        testNonce,
		ChallengedAt: challengedAt,
		Profile:      profile,
		References: References{
			Measurements: []Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: measurement(workload[:]), HostData: hostData}},
			MinSNPTCB:    labTCB,
		},
	}
}

// realSNP is go-sev-guest's real Milan report (version 2, debug allowed)
// with its VCEK certificate and AMD's Milan ASK and ARK.
func realSNP(t testing.TB) []byte {
	t.Helper()
	ask, ark, err := kds.ParseProductCertChain(trust.AskArkMilanVcekBytes)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := evidence.EncodeSNP(sevtestdata.AttestationBytes, evidence.SNPCerts{ARK: ark, ASK: ask, VCEK: sevtestdata.VcekBytes})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// realSNPRequest expects what the real report carries.
func realSNPRequest(ev []byte) Request {
	report, _ := abi.ReportToProto(sevtestdata.AttestationBytes)
	req := Request{
		TEE:          v1alpha1.TEESEVSNP,
		Evidence:     ev,
		ChallengedAt: challengedAt,
		Profile:      guard.ProfileProduction,
		References: References{
			Measurements: []Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: measurement(report.GetMeasurement())}},
		},
	}
	copy(req.Nonce[:], report.GetReportData())
	return req
}

// realTDX is go-tdx-guest's real quote without the trailer the library
// appends for its own tests, which nothing signs.
func realTDX(t testing.TB) []byte {
	t.Helper()
	raw := tdxtestdata.RawQuote
	size := binary.LittleEndian.Uint32(raw[0x278:0x27C])
	return bytes.Clone(raw[:0x27C+int(size)])
}

// Offsets in a TDX quote.
const (
	tdxMRTD       = 0x30 + 0x88
	tdxReportData = 0x30 + 0x208
	tdxSignature  = 0x27C
)

func tdxVerifier(t testing.TB, now time.Time) *Verifier {
	return newVerifier(t, now, Options{TDXCollateral: tdxtesting.TestGetter})
}

// tdxRequest expects what the real quote carries.
func tdxRequest(raw []byte) Request {
	req := Request{
		TEE:          v1alpha1.TEETDX,
		Evidence:     raw,
		ChallengedAt: tdxNow.Add(-time.Minute),
		Profile:      guard.ProfileProduction,
		References: References{
			Measurements: []Reference{{
				TEE:         v1alpha1.TEETDX,
				Measurement: measurement(raw[tdxMRTD : tdxMRTD+MeasurementSize]),
				HostData:    make([]byte, TDXConfigIDSize),
			}},
		},
	}
	copy(req.Nonce[:], raw[tdxReportData:tdxReportData+nonce.Size])
	return req
}

func flip(b []byte, at int) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0x01
	return c
}

// wantReason checks that err carries reason.
func wantReason(t *testing.T, err error, reason guard.Reason) {
	t.Helper()
	t.Log(err)
	got, ok := ReasonOf(err)
	if !ok || got != reason {
		t.Fatalf("got %v, want reason %s", err, reason)
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
