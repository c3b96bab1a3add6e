package evidence_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	sevtestdata "github.com/google/go-sev-guest/verify/testdata"
	"github.com/google/go-sev-guest/verify/trust"
	tdxabi "github.com/google/go-tdx-guest/abi"
	tdxtestdata "github.com/google/go-tdx-guest/testing/testdata"
	"github.com/google/uuid"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

// realSNP is go-sev-guest's real Milan report with its VCEK and AMD's
// Milan ASK and ARK.
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

// realTDX is go-tdx-guest's real quote without the trailer the library
// appends to it for its own tests ("extra bytes (only for testing
// purpose)"), which nothing signs.
func realTDX(t testing.TB) []byte {
	t.Helper()
	raw := tdxtestdata.RawQuote
	size := binary.LittleEndian.Uint32(raw[0x278:0x27C])
	return bytes.Clone(raw[:0x27C+int(size)])
}

// labSNP is a report signed with the lab chain of ../testdata/labchain.
func labSNP(t testing.TB) []byte {
	t.Helper()
	c, err := labtee.ReadSecretDir("../testdata/labchain/lab")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.Sign(labtee.Report{})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestSNPRoundTrip(t *testing.T) {
	report := sevtestdata.AttestationBytes
	cases := []evidence.SNPCerts{
		{},
		{VCEK: sevtestdata.VcekBytes},
		{ARK: []byte("ark"), ASK: []byte("ask"), VCEK: sevtestdata.VcekBytes},
		{ASK: []byte("asvk"), VLEK: []byte("vlek")},
	}
	for _, certs := range cases {
		ev, err := evidence.EncodeSNP(report, certs)
		if err != nil {
			t.Fatal(err)
		}
		att, err := evidence.DecodeSNP(ev)
		if err != nil {
			t.Fatalf("DecodeSNP(EncodeSNP(%d certs)): %v", len(ev)-len(report), err)
		}
		chain := att.GetCertificateChain()
		got := evidence.SNPCerts{ARK: chain.GetArkCert(), ASK: chain.GetAskCert(), VCEK: chain.GetVcekCert(), VLEK: chain.GetVlekCert()}
		again, _ := evidence.EncodeSNP(report, got)
		if !bytes.Equal(again, ev) {
			t.Error("decoding and encoding again changes the evidence")
		}
	}
	if _, err := evidence.EncodeSNP(report[:100], evidence.SNPCerts{}); err == nil {
		t.Error("a short report was encoded")
	}
}

// table builds a certificate table by hand.
func table(entries []entry, data []byte) []byte {
	var out []byte
	for _, e := range entries {
		var raw [24]byte
		copy(raw[:16], e.guid[:])
		binary.LittleEndian.PutUint32(raw[16:20], e.offset)
		binary.LittleEndian.PutUint32(raw[20:24], e.length)
		out = append(out, raw[:]...)
	}
	out = append(out, make([]byte, 24)...)
	return append(out, data...)
}

type entry struct {
	guid           uuid.UUID
	offset, length uint32
}

var (
	vcekGUID = uuid.MustParse(abi.VcekGUID)
	askGUID  = uuid.MustParse(abi.AskGUID)
	arkGUID  = uuid.MustParse(abi.ArkGUID)
)

func TestDecodeSNPRefuses(t *testing.T) {
	report := sevtestdata.AttestationBytes
	valid := realSNP(t)
	withTable := func(tb []byte) []byte { return append(bytes.Clone(report), tb...) }
	cases := []struct {
		name string
		raw  []byte
	}{
		{"short", report[:abi.ReportSize-1]},
		{"trailing byte", append(bytes.Clone(valid), 0)},
		{"terminator only", withTable(make([]byte, 24))},
		{"no terminator", withTable(make([]byte, 23))},
		{"unknown entry", withTable(table([]entry{{uuid.MustParse(abi.ExtraPlatformInfoGUID), 48, 1}}, []byte{1}))},
		{"repeated entry", withTable(table([]entry{{vcekGUID, 72, 1}, {vcekGUID, 73, 1}}, []byte{1, 2}))},
		{"out of order", withTable(table([]entry{{askGUID, 72, 1}, {arkGUID, 73, 1}}, []byte{1, 2}))},
		{"gap", withTable(table([]entry{{vcekGUID, 49, 1}}, []byte{0, 1}))},
		{"padding", withTable(table([]entry{{vcekGUID, 48, 1}}, []byte{1, 0}))},
		{"inside the header", withTable(table([]entry{{vcekGUID, 24, 24}}, nil))},
		{"empty certificate", withTable(table([]entry{{vcekGUID, 48, 0}}, nil))},
		{"past the end", withTable(table([]entry{{vcekGUID, 48, 2}}, []byte{1}))},
		// offset+length wraps around in 32 bits.
		{"wrapping length", withTable(table([]entry{{vcekGUID, 0xffffffff, 2}}, []byte{1}))},
	}
	version1 := bytes.Clone(valid)
	version1[0] = 1
	cases = append(cases, struct {
		name string
		raw  []byte
	}{"report version 1", version1})
	reserved := bytes.Clone(valid)
	reserved[0x4C] = 1 // must be zero
	cases = append(cases, struct {
		name string
		raw  []byte
	}{"reserved byte set", reserved})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := evidence.DecodeSNP(tc.raw); err == nil {
				t.Error("decoded")
			}
		})
	}
}

func TestNormalizeSNP(t *testing.T) {
	report := sevtestdata.AttestationBytes
	// As a host might return it: VCEK first, an extra entry, page padding.
	certs := []byte("VCEKASKARKextra")
	tb := table([]entry{
		{vcekGUID, 120, 4}, // after five 24-byte header entries
		{askGUID, 124, 3},
		{arkGUID, 127, 3},
		{uuid.MustParse(abi.ExtraPlatformInfoGUID), 130, 5},
	}, append(certs, make([]byte, 4000)...))
	got, err := evidence.NormalizeSNP(report, tb)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := evidence.EncodeSNP(report, evidence.SNPCerts{ARK: []byte("ARK"), ASK: []byte("ASK"), VCEK: []byte("VCEK")})
	if !bytes.Equal(got, want) {
		t.Error("normalized evidence is not the canonical encoding")
	}
	if _, err := evidence.DecodeSNP(got); err != nil {
		t.Error(err)
	}
	for name, bad := range map[string][]byte{
		"past the end":    table([]entry{{vcekGUID, 48, 10}}, []byte{1}),
		"wrapping length": table([]entry{{vcekGUID, 0xffffffff, 2}}, []byte{1}),
		"repeated entry":  table([]entry{{vcekGUID, 72, 1}, {vcekGUID, 72, 1}}, []byte{1}),
	} {
		if _, err := evidence.NormalizeSNP(report, bad); err == nil {
			t.Errorf("%s: normalized", name)
		}
	}
}

func TestDecodeTDX(t *testing.T) {
	quote, err := evidence.DecodeTDX(realTDX(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(quote.GetTdQuoteBody().GetMrTd()); got != 48 {
		t.Errorf("MRTD is %d bytes", got)
	}
	if _, err := evidence.DecodeTDX(tdxtestdata.RawQuote); err == nil {
		t.Error("the quote with the library's unsigned trailer was decoded")
	}
}

// withChain returns the real quote with another PCK certificate chain and
// every size field adjusted.
func withChain(t *testing.T, chain []byte) []byte {
	t.Helper()
	q, err := evidence.DecodeTDX(realTDX(t))
	if err != nil {
		t.Fatal(err)
	}
	pck := q.SignedData.CertificationData.QeReportCertificationData.PckCertificateChainData
	grow := uint32(len(chain)) - pck.Size
	pck.PckCertChain, pck.Size = chain, uint32(len(chain))
	q.SignedData.CertificationData.Size += grow
	q.SignedDataSize += grow
	raw, err := tdxabi.QuoteToAbiBytes(q)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestDecodeTDXChain(t *testing.T) {
	q, _ := evidence.DecodeTDX(realTDX(t))
	chain := q.SignedData.CertificationData.QeReportCertificationData.PckCertificateChainData.PckCertChain
	if _, err := evidence.DecodeTDX(withChain(t, append(bytes.Clone(chain), 0))); err != nil {
		t.Errorf("a chain with one trailing NUL was refused: %v", err)
	}
	for name, bad := range map[string][]byte{
		"two trailing NULs":    append(bytes.Clone(chain), 0, 0),
		"trailing newline":     append(bytes.Clone(chain), '\n'),
		"text before":          append([]byte("x\n"), chain...),
		"CRLF line endings":    bytes.ReplaceAll(chain, []byte("\n"), []byte("\r\n")),
		"two certificates":     chain[:bytes.LastIndex(chain, []byte("-----BEGIN"))],
		"a fourth certificate": append(bytes.Clone(chain), chain[bytes.LastIndex(chain, []byte("-----BEGIN")):]...),
	} {
		if _, err := evidence.DecodeTDX(withChain(t, bad)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestDecodeTDXRefusesBadSizes(t *testing.T) {
	valid := realTDX(t)
	set32 := func(off int, v uint32) []byte {
		b := bytes.Clone(valid)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	certData := 0x27C + 0x80
	cases := map[string][]byte{
		"short":                    valid[:0x27B],
		"truncated":                valid[:len(valid)-1],
		"trailing byte":            append(bytes.Clone(valid), 0),
		"signed size too large":    set32(0x278, 0xffffffff),
		"signed size too small":    set32(0x278, 10),
		"certification size wrong": set32(certData+2, 0xfffffff0),
		"QE auth size past the end": func() []byte {
			b := bytes.Clone(valid)
			binary.LittleEndian.PutUint16(b[certData+6+0x1C0:], 0xffff)
			return b
		}(),
		"version 3": func() []byte { b := bytes.Clone(valid); b[0] = 3; return b }(),
	}
	for name, raw := range cases {
		if _, err := evidence.DecodeTDX(raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
