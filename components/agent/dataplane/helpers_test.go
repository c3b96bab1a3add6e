//go:build linux

package dataplane

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"

	"golang.org/x/sys/unix"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// bpffs mounts a private bpffs for one test and returns a pin directory on
// it. A private mount keeps tests from seeing each other's pins and removes
// everything left when it is unmounted.
func bpffs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting bpffs %s: %v", dir, err)
		}
	})
	return dir + "/xila-guard"
}

// requireKernel skips a test only when the kernel lacks a feature the
// dataplane needs: netfilter BPF links (6.4) always, TCX links (6.6) when
// the test asks for them.
func requireKernel(t testing.TB, mode AttachMode) {
	t.Helper()
	if err := features.HaveProgramType(ebpf.Netfilter); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks netfilter BPF programs: %v", err)
	}
	if mode == AttachTCX {
		if ok, err := tcxSupported(); err == nil && !ok {
			t.Skip("kernel lacks TCX links")
		}
	}
}

// openIn opens a dataplane inside ns, closed when the test ends.
func openIn(t testing.TB, ns *netns.NS, cfg Config) *Dataplane {
	t.Helper()
	requireKernel(t, cfg.Attach)
	var d *Dataplane
	if err := ns.Do(func() (err error) {
		d, err = Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// applyIn runs Apply inside ns, where the endpoint's interface lives.
func applyIn(t testing.TB, ns *netns.NS, d *Dataplane, ep Endpoint, in, eg rules.RuleSet) error {
	t.Helper()
	return ns.Do(func() error { return d.Apply(ep, in, eg) })
}

func mustApplyIn(t testing.TB, ns *netns.NS, d *Dataplane, ep Endpoint, in, eg rules.RuleSet) {
	t.Helper()
	if err := applyIn(t, ns, d, ep, in, eg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// ruleSet builds an isolated rule set from prefix, ports pairs.
func ruleSet(entries ...any) rules.RuleSet {
	var b rules.Builder
	for i := 0; i+1 < len(entries); i += 2 {
		ps, ok := entries[i+1].(rules.PortSet)
		if !ok {
			ps = entries[i+1].(portList).PortSet
		}
		b.Add(prefix(entries[i].(string)), ps)
	}
	return b.Build(true)
}

// portList is a port set that unions with another in a call chain.
type portList struct{ rules.PortSet }

func (p portList) union(o portList) rules.PortSet { return rules.Union(p.PortSet, o.PortSet) }

func ports(proto rules.Protocol, ranges ...uint16) portList {
	var ps rules.PortSet
	for i := 0; i+1 < len(ranges); i += 2 {
		ps.Ranges = append(ps.Ranges, rules.PortRange{Protocol: proto, First: ranges[i], Last: ranges[i+1]})
	}
	return portList{ps.Normalize()}
}
