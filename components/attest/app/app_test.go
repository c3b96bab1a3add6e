package app

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

const labChainDir = "../testdata/labchain/lab"

func TestRunCommands(t *testing.T) {
	var out, errs bytes.Buffer
	if err := Run(context.Background(), []string{"version"}, &out, &errs); err != nil || !strings.HasPrefix(out.String(), Name+" ") {
		t.Errorf("version: %q, %v", out.String(), err)
	}
	for _, args := range [][]string{nil, {"frobnicate"}} {
		if err := Run(context.Background(), args, io.Discard, &errs); err == nil || !strings.Contains(errs.String(), "commands:") {
			t.Errorf("%q: %v", args, err)
		}
	}
	if err := Run(context.Background(), []string{"controller", "-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("controller -h: %v", err)
	}
}

func TestControllerFlags(t *testing.T) {
	o, err := ParseControllerFlags([]string{"--reference-values=refs.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.profile != guard.ProfileProduction || o.interval != time.Minute || o.attesterSelector.String() != DefaultAttesterSelector {
		t.Errorf("defaults %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--reference-values is required"},
		{[]string{"--reference-values=r", "--profile=test"}, `--profile "test"`},
		{[]string{"--reference-values=r", "--attester-selector="}, "must select something"},
		{[]string{"--reference-values=r", "--attester-selector=a in (b"}, "--attester-selector"},
		{[]string{"--reference-values=r", "--attester-port=0"}, "--attester-port 0"},
		{[]string{"--reference-values=r", "--interval=0s"}, "--interval must be positive"},
		{[]string{"--reference-values=r", "--attester-timeout=10m"}, "must be below --max-challenge-age"},
		{[]string{"--reference-values=r", "--challenge-tls-cert-file=c"}, "go together"},
		{[]string{"--reference-values=r", "extra"}, "unexpected arguments"},
		{[]string{"--reference-values=r", "--lab-chain-secret=chain"}, "want namespace/name"},
		{[]string{"--reference-values=r", "--tdx-collateral=pcs.example"}, "--tdx-collateral"},
		{[]string{"--reference-values=r", "--tdx-collateral=https://pcs.example/?x=1"}, "--tdx-collateral"},
		{[]string{"--reference-values=r", "--tdx-collateral=intel", "--tdx-collateral-cache=0s"}, "--tdx-collateral-cache must be positive"},
		{[]string{"--reference-values=r", "--lab-chain-secret=ns/a/b"}, "want namespace/name"},
		{[]string{"--reference-values=r", "--lab-chain-secret=ns/chain", "--lab-root-file=f"}, "exclude each other"},
	} {
		if _, err := ParseControllerFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestAttesterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend=sgx"}, `--backend "sgx"`},
		{[]string{"--backend=lab"}, "needs --lab-chain-dir and --lab-measurement"},
		{[]string{"--lab-measurement=x"}, "the --lab-* flags need --backend lab"},
		{[]string{"--tsm-privilege-level=4"}, "want -1 to 3"},
		{[]string{"--backend=lab", "--lab-chain-dir=d", "--lab-measurement=m", "--tsm-privilege-level=0"}, "needs --backend tsm"},
		{[]string{"--report-timeout=0s"}, "--report-timeout must be positive"},
		{[]string{"--tls-key-file=k"}, "go together"},
		{[]string{"--lab-node-measurements=w1"}, "want node=sha384"},
		{[]string{"--lab-node-measurements=w1=sha256:00"}, "node w1"},
		{[]string{"--lab-node-measurements=w1=" + labMeasurement("a") + ",w1=" + labMeasurement("b")}, "listed twice"},
		{[]string{"--lab-node-measurements=w1=" + labMeasurement("a")}, "the --lab-* flags need --backend lab"},
		{[]string{"--lab-epc-size=67108864"}, "the --lab-* flags need --backend lab"},
		{[]string{"--backend=lab", "--lab-chain-dir=d", "--lab-measurement=m", "--lab-epc-size=-1"}, "--lab-epc-size -1 is negative"},
		{[]string{`--lab-node-gpus={"w1":[{"id":"GPU-1"}]}`}, "the --lab-* flags need --backend lab"},
		{[]string{`--lab-node-gpus={"w1":[{"id":"GPU-1","colour":"red"}]}`}, `unknown field "w1[0].colour"`},
		{[]string{`--lab-node-gpus={"w1":[{"id":"GPU-1"},{"id":"GPU-1"}]}`}, "stated twice"},
		{[]string{`--lab-node-gpus={"w1":[{"model":"x"}]}`}, "has no id"},
		{[]string{`--lab-node-gpus={"w1":[{"id":"GPU-1","dra":{"driver":"d","pool":"p","device":"gpu-0"}}]}`}, "only the controller names"},
		{[]string{`--lab-node-gpus={"w1":[{"id":"GPU-1","ccMode":"Maybe"}]}`}, `ccMode "Maybe" is unknown`},
	} {
		if _, err := parseAttesterFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	o, err := parseAttesterFlags([]string{"--backend=lab", "--lab-chain-dir=" + labChainDir, "--lab-measurement=sha384:" + strings.Repeat("0", 95) + "g"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.newBackend(); err == nil || !strings.Contains(err.Error(), "--lab-measurement") {
		t.Errorf("a malformed measurement: %v", err)
	}
}

// labMeasurement is the lab measurement of a workload, as the flags take it.
func labMeasurement(workload string) string {
	m := sha512.Sum384([]byte(workload))
	return "sha384:" + hex.EncodeToString(m[:])
}

// TestAttesterNodeMeasurements checks that a node listed in
// --lab-node-measurements states its own measurement and every other node
// the default.
func TestAttesterNodeMeasurements(t *testing.T) {
	for _, tc := range []struct{ node, want string }{
		{"w1", labMeasurement("default")},
		{"w2", labMeasurement("tampered")},
		{"", labMeasurement("default")},
	} {
		o, err := parseAttesterFlags([]string{"--backend=lab", "--lab-chain-dir=" + labChainDir, "--node-name=" + tc.node,
			"--lab-measurement=" + labMeasurement("default"), "--lab-node-measurements=w2=" + labMeasurement("tampered") + ", w3=" + labMeasurement("other")}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		b, err := o.newBackend()
		if err != nil {
			t.Fatal(err)
		}
		if got := "sha384:" + hex.EncodeToString(b.(*attester.Lab).Measurement[:]); got != tc.want {
			t.Errorf("node %q states %s, want %s", tc.node, got, tc.want)
		}
	}
}

// TestAttesterServesLabEvidence runs the attester command's server with
// the lab backend and asks it as the controller does.
func TestAttesterServesLabEvidence(t *testing.T) {
	m := sha512.Sum384([]byte("workload"))
	o, err := parseAttesterFlags([]string{"--backend=lab", "--lab-chain-dir=" + labChainDir,
		"--lab-measurement=sha384:" + hex.EncodeToString(m[:]), "--lab-host-data=" + strings.Repeat("42", 32), "--lab-epc-size=67108864",
		"--node-name=w1", `--lab-node-gpus={"w1": [{"id": "GPU-1", "model": "Example GPU", "ccMode": "On"}], "w2": [{"id": "GPU-2"}]}`}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.newBackend()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveAttester(ctx, o, b, ln, newLogger(io.Discard, 0)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	challenge := nonce.NewChallenge()
	ev, err := (&attester.Client{}).Evidence(context.Background(), "http://"+ln.Addr().String(),
		&attester.Request{NodeUID: "uid", Incarnation: "inc", Challenge: challenge})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUDevice{{ID: "GPU-1", Model: "Example GPU", CCMode: v1alpha1.CCModeOn}}
	if !reflect.DeepEqual(ev.Devices, want) {
		t.Errorf("devices %+v, want node w1's %+v", ev.Devices, want)
	}
	att, err := evidence.DecodeSNP(ev.Data)
	if err != nil || ev.TEE != v1alpha1.TEESEVSNP {
		t.Fatalf("%s evidence: %v", ev.TEE, err)
	}
	if r := att.GetReport(); !bytes.Equal(r.GetMeasurement(), m[:]) || r.GetHostData()[0] != 0x42 {
		t.Errorf("measurement %x, host data %x", r.GetMeasurement(), r.GetHostData())
	}
	enc, err := attester.EncodeDevices(want)
	if err != nil {
		t.Fatal(err)
	}
	if rd := nonce.ForDevices("uid", "inc", challenge, enc); !bytes.Equal(att.GetReport().GetReportData(), rd[:]) {
		t.Errorf("the report data does not bind the devices: %x", att.GetReport().GetReportData())
	}
	if ev.EPCSize != 67108864 {
		t.Errorf("EPC size %d, want --lab-epc-size 67108864", ev.EPCSize)
	}
}
