package attester

import (
	"bytes"
	"context"
	"crypto/sha512"
	"strings"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

func TestLabEvidenceStatesItsConfiguration(t *testing.T) {
	lab := &Lab{Chain: chain(t), Measurement: sha512.Sum384([]byte("workload")), Policy: labtee.DefaultPolicy | labtee.PolicyDebug, GuestSVN: 7}
	lab.HostData[0] = 0x42
	rd := nonce.For("uid", "inc", []byte("challenge-challenge"))
	ev, err := lab.Evidence(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if ev.TEE != v1alpha1.TEESEVSNP {
		t.Errorf("TEE %s", ev.TEE)
	}
	att, err := evidence.DecodeSNP(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	r := att.GetReport()
	for name, pair := range map[string][2][]byte{
		"measurement": {r.GetMeasurement(), lab.Measurement[:]},
		"host data":   {r.GetHostData(), lab.HostData[:]},
		"report data": {r.GetReportData(), rd[:]},
		"chip ID":     {r.GetChipId(), lab.Chain.ChipID[:]},
	} {
		if !bytes.Equal(pair[0], pair[1]) {
			t.Errorf("%s %x, want %x", name, pair[0], pair[1])
		}
	}
	if r.GetPolicy() != lab.Policy || r.GetGuestSvn() != 7 {
		t.Errorf("policy %#x, guest SVN %d", r.GetPolicy(), r.GetGuestSvn())
	}
}

func TestLabEvidenceHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Lab{Chain: chain(t)}).Evidence(ctx, [nonce.Size]byte{}); err == nil {
		t.Error("evidence for a cancelled request")
	}
}

func TestParseMeasurementAndHostData(t *testing.T) {
	digest := strings.Repeat("ab", 48)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"sha384:" + digest, true}, {digest, true}, {"sha256:" + digest, false}, {"sha384:" + digest[:94], false},
		{"sha384:" + digest + "00", false}, {"sha384:" + strings.Repeat("zz", 48), false}, {"", false},
	} {
		m, err := ParseMeasurement(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseMeasurement(%q) error %v, want ok %v", tc.in, err, tc.ok)
		}
		if tc.ok && m[0] != 0xab {
			t.Errorf("ParseMeasurement(%q) = %x", tc.in, m)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"", true}, {strings.Repeat("01", 32), true}, {strings.Repeat("01", 31), false}, {strings.Repeat("01", 48), false}, {"xy", false}} {
		if _, err := ParseHostData(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseHostData(%q) error %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}
