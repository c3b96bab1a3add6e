package attester

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-configfs-tsm/configfs/configfsi"
	"github.com/google/go-configfs-tsm/configfs/faketsm"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// fakeTSM is a configfs-tsm report subsystem whose guest driver is
// provider: for sev_guest it signs the inblob with the lab chain and
// returns the report and, padded, the certificate table, as the kernel
// does; for tdx_guest it returns quote.
func fakeTSM(t *testing.T, provider string, quote []byte) (*faketsm.Client, *[]string) {
	c := chain(t)
	var privileges []string
	sub := &faketsm.ReportSubsystem{
		Random: rand.Reader,
		MakeEntry: func() *faketsm.ReportEntry {
			return &faketsm.ReportEntry{InAttrs: map[string]*faketsm.ReportAttributeState{
				"inblob": {}, "privlevel": {Value: []byte("0\n")},
			}}
		},
		CheckInAttr: func(e *faketsm.ReportEntry, attr string, contents []byte) error {
			if attr == "privlevel" {
				privileges = append(privileges, string(contents))
			}
			if attr == "inblob" && len(contents) > nonce.Size {
				return fmt.Errorf("inblob of %d bytes", len(contents))
			}
			return nil
		},
		ReadAttr: func(e *faketsm.ReportEntry, attr string) ([]byte, error) {
			switch attr {
			case "provider":
				return []byte(provider + "\n"), nil
			case "outblob", "auxblob":
			default:
				return nil, os.ErrNotExist
			}
			if provider == ProviderTDXGuest {
				if attr == "auxblob" {
					return nil, os.ErrNotExist
				}
				return quote, nil
			}
			var rd [nonce.Size]byte
			copy(rd[:], e.InAttrs["inblob"].Value)
			ev, err := c.Sign(labtee.Report{ReportData: rd})
			if err != nil {
				return nil, err
			}
			if attr == "outblob" {
				return ev[:evidence.SNPReportSize], nil
			}
			return append(bytes.Clone(ev[evidence.SNPReportSize:]), make([]byte, 100)...), nil
		},
	}
	return &faketsm.Client{Subsystems: map[string]configfsi.Client{"report": sub}}, &privileges
}

func TestTSMSEVSNP(t *testing.T) {
	client, privileges := fakeTSM(t, ProviderSEVGuest, nil)
	level := uint(2)
	rd := nonce.For("uid", "inc", []byte("challenge-challenge"))
	ev, err := (&TSM{Client: client, Privilege: &level}).Evidence(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if ev.TEE != v1alpha1.TEESEVSNP {
		t.Errorf("TEE %s", ev.TEE)
	}
	att, err := evidence.DecodeSNP(ev.Data)
	if err != nil {
		t.Fatalf("the evidence is not canonical: %v", err)
	}
	if !bytes.Equal(att.GetReport().GetReportData(), rd[:]) {
		t.Errorf("report data %x, want %x", att.GetReport().GetReportData(), rd)
	}
	if !bytes.Equal(att.GetCertificateChain().GetVcekCert(), chain(t).VCEK.Raw) {
		t.Error("the evidence lacks the VCEK certificate")
	}
	if len(*privileges) != 1 || (*privileges)[0] != "2" {
		t.Errorf("privilege levels written %q, want [2]", *privileges)
	}
}

func TestTSMTDX(t *testing.T) {
	quote := []byte("a TDX quote")
	client, privileges := fakeTSM(t, ProviderTDXGuest, quote)
	ev, err := (&TSM{Client: client}).Evidence(context.Background(), [nonce.Size]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.TEE != v1alpha1.TEETDX || !bytes.Equal(ev.Data, quote) {
		t.Errorf("evidence %s %q", ev.TEE, ev.Data)
	}
	if len(*privileges) != 0 {
		t.Errorf("privilege levels written %q without one configured", *privileges)
	}
}

func TestTSMUnknownProvider(t *testing.T) {
	client, _ := fakeTSM(t, "fake", nil)
	if _, err := (&TSM{Client: client}).Evidence(context.Background(), [nonce.Size]byte{}); err == nil {
		t.Error("evidence from an unknown provider")
	}
}
