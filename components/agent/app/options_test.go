package app

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xila-guard/xila-guard/components/agent/dataplane"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *Options)
	}{
		{name: "defaults", args: []string{"--node-name=n1"}, check: func(t *testing.T, o *Options) {
			if o.Mode != ModeEnforce || o.PinPath != DefaultPinPath || o.Attach != dataplane.AttachAuto {
				t.Errorf("defaults: %+v", o)
			}
			if !slices.Equal(o.ServiceCIDRs, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}) {
				t.Errorf("service CIDRs %v", o.ServiceCIDRs)
			}
		}},
		{name: "audit with two service CIDRs", args: []string{"--node-name=n1", "--mode=audit", "--service-cidrs=10.96.0.0/12, fd00:10:96::/112"}, check: func(t *testing.T, o *Options) {
			if o.Mode != ModeAudit || len(o.ServiceCIDRs) != 2 {
				t.Errorf("got %+v", o)
			}
		}},
		{name: "cleanup needs no node", args: []string{"--mode=cleanup"}},
		{name: "no node", args: nil, wantErr: "no node name"},
		{name: "unknown mode", args: []string{"--node-name=n1", "--mode=permissive"}, wantErr: "--mode"},
		{name: "bad CIDR", args: []string{"--node-name=n1", "--service-cidrs=10.96.0.0"}, wantErr: "--service-cidrs"},
		{name: "bad attach", args: []string{"--node-name=n1", "--attach=xdp"}, wantErr: "--attach"},
		{name: "bad daemonset", args: []string{"--node-name=n1", "--daemonset=agent"}, wantErr: "--daemonset"},
		{name: "bad log level", args: []string{"--node-name=n1", "--log-level=loud"}, wantErr: "--log-level"},
		{name: "stray argument", args: []string{"--node-name=n1", "extra"}, wantErr: "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			o, err := ParseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestNodeNameFromEnvironment(t *testing.T) {
	t.Setenv("NODE_NAME", "worker-7")
	o, err := ParseFlags(nil, io.Discard)
	if err != nil || o.NodeName != "worker-7" {
		t.Fatalf("ParseFlags = %+v, %v; want node worker-7 from $NODE_NAME", o, err)
	}
}
