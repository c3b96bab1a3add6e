package app

import (
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/teeresources"
)

func TestTEEResourcesFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "tee-1")
	o, err := ParseTEEResourcesFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodeName != "tee-1" || o.enclaveLimit != teeresources.DefaultEnclaveLimit || o.lab || o.devDir != "/dev" ||
		o.pluginDir != "/var/lib/kubelet/device-plugins/" || o.resync != time.Minute ||
		!slices.Equal(o.accepted, []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}) {
		t.Errorf("defaults %+v", o)
	}
	o, err = ParseTEEResourcesFlags([]string{"--node-name=tee-2", "--accepted-sources=attested, nfd", "--enclave-limit=5", "--lab"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodeName != "tee-2" || o.enclaveLimit != 5 || !o.lab ||
		!slices.Equal(o.accepted, []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD}) {
		t.Errorf("flags %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-name="}, "--node-name is required"},
		{[]string{"--enclave-limit=0"}, "--enclave-limit 0"},
		{[]string{"--enclave-limit=10001"}, "--enclave-limit 10001"},
		{[]string{"--accepted-sources=attested,tpm"}, `source "tpm"`},
		{[]string{"--accepted-sources="}, `source ""`},
		{[]string{"--accepted-sources=nfd,nfd"}, "listed twice"},
		{[]string{"--resync=0s"}, "--resync must be positive"},
		{[]string{"--device-plugin-dir="}, "may not be empty"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		if _, err := ParseTEEResourcesFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := Run(context.Background(), []string{"tee-resources", "-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("tee-resources -h: %v", err)
	}
}
