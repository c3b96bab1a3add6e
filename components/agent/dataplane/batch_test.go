//go:build linux

package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/internal/packet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// interfaces adds n veth pairs to ns and returns endpoints on one end of
// each, endpoint i with address 10.9.0.(i+1).
func interfaces(t testing.TB, ns *netns.NS, n int) []Endpoint {
	t.Helper()
	var eps []Endpoint
	for i := range n {
		name := fmt.Sprintf("d%d", i)
		ns.MustRun(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
		var ifindex int
		if err := ns.Do(func() error {
			ifc, err := net.InterfaceByName(name)
			if err == nil {
				ifindex = ifc.Index
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		eps = append(eps, Endpoint{Ifindex: ifindex, Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)})}})
	}
	return eps
}

// TestApplyAllWaitsOnce checks that a batch of switches waits for one grace
// period, not one per pod, and still leaves only the live generations.
func TestApplyAllWaitsOnce(t *testing.T) {
	ns := netns.Add(t, netns.Prefix()+"-batch")
	d := openIn(t, ns, Config{PinPath: bpffs(t)})
	eps := interfaces(t, ns, 8)
	batch := func(rs rules.RuleSet) {
		t.Helper()
		var cs []Change
		for _, ep := range eps {
			cs = append(cs, Change{Endpoint: ep, Ingress: rs, Egress: rs})
		}
		if err := ns.Do(func() error { return errors.Join(d.ApplyAll(cs)...) }); err != nil {
			t.Fatalf("ApplyAll: %v", err)
		}
	}
	batch(ruleSet("10.1.0.0/16", rules.AnyPort))
	before := d.barrier.waits
	batch(ruleSet("10.2.0.0/16", rules.AnyPort))
	if n := d.barrier.waits - before; n != 1 {
		t.Errorf("switching %d pods waited for %d grace periods, want 1", len(eps), n)
	}
	if n := d.generationCount(); n != 2*len(eps) {
		t.Errorf("%d generations in the maps, want %d (the live ones)", n, 2*len(eps))
	}
	before = d.barrier.waits
	var gone []int
	for _, ep := range eps {
		gone = append(gone, ep.Ifindex)
	}
	if err := ns.Do(func() error { return d.RemoveAll(gone) }); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	if n := d.barrier.waits - before; n != 1 {
		t.Errorf("removing %d pods waited for %d grace periods, want 1", len(eps), n)
	}
	if n := d.generationCount(); n != 0 {
		t.Errorf("%d generations left after removing every pod", n)
	}
}

// TestApplyAllMakesRoomByRetiringEarly fills the exact-peer map with
// switches whose old rules are still in place, so that the batch only fits
// if it retires them early, as pod-by-pod switching would have.
func TestApplyAllMakesRoomByRetiringEarly(t *testing.T) {
	ns := netns.Add(t, netns.Prefix()+"-full")
	d := openIn(t, ns, Config{PinPath: bpffs(t)})
	eps := interfaces(t, ns, 12) // 12 pods × 2 directions × 9,000 exact peers: 216,000 of 262,144
	batch := func(rs rules.RuleSet) []error {
		var cs []Change
		for _, ep := range eps {
			cs = append(cs, Change{Endpoint: ep, Ingress: rs, Egress: rs})
		}
		var errs []error
		ns.Do(func() error { errs = d.ApplyAll(cs); return nil })
		return errs
	}
	for _, rs := range []rules.RuleSet{benchRuleSet(), benchRuleSet(addr("192.0.2.1"))} {
		for i, err := range batch(rs) {
			if err != nil {
				t.Fatalf("pod %d: %v", i, err)
			}
		}
	}
	if n := d.generationCount(); n != 2*len(eps) {
		t.Errorf("%d generations in the maps, want %d", n, 2*len(eps))
	}
}

// TestRemovePurgesFlowsOfThatInterfaceOnly fills the flow table across
// several interfaces and checks that removing one deletes exactly its flows.
func TestRemovePurgesFlowsOfThatInterfaceOnly(t *testing.T) {
	ns := netns.Add(t, netns.Prefix()+"-purge")
	d := openIn(t, ns, Config{PinPath: bpffs(t)})
	eps := interfaces(t, ns, 3)
	for _, ep := range eps {
		mustApplyIn(t, ns, d, ep, rules.AllowAll, rules.AllowAll)
	}
	const perIf = 10000
	fillFlows(t, d, eps, perIf)
	if err := ns.Do(func() error { return d.Remove(eps[1].Ifindex) }); err != nil {
		t.Fatal(err)
	}
	count := map[uint32]int{}
	var k bpfobj.XgFlowKey
	var v bpfobj.XgFlowValue
	for it := d.objs.XgFlows.Iterate(); it.Next(&k, &v); {
		count[k.Ifindex]++
	}
	for i, ep := range eps {
		want := perIf
		if i == 1 {
			want = 0
		}
		if got := count[uint32(ep.Ifindex)]; got != want {
			t.Errorf("interface %d: %d flows after removing interface %d, want %d", ep.Ifindex, got, eps[1].Ifindex, want)
		}
	}
}

// fillFlows writes n tracked flows for each endpoint.
func fillFlows(t testing.TB, d *Dataplane, eps []Endpoint, n int) {
	t.Helper()
	var keys []bpfobj.XgFlowKey
	var vals []bpfobj.XgFlowValue
	for _, ep := range eps {
		for i := range n {
			keys = append(keys, bpfobj.XgFlowKey{Ifindex: uint32(ep.Ifindex), Family: familyV4, Proto: packet.TCP,
				PodPort: uint16(i), PeerPort: 80, PodAddr: addr16(ep.Addrs[0]), PeerAddr: addr16(addr("10.1.0.1"))})
			vals = append(vals, bpfobj.XgFlowValue{Expires: uint64(time.Hour)})
		}
	}
	if _, err := d.objs.XgFlows.BatchUpdate(keys, vals, nil); err != nil {
		t.Fatalf("filling the flow table: %v", err)
	}
}

// BenchmarkRemoveBusyNode measures removing one pod's interface while the
// flow table holds 60,000 flows of 20 pods.
func BenchmarkRemoveBusyNode(b *testing.B) {
	ns := netns.Add(b, netns.Prefix()+"-bench")
	d := openIn(b, ns, Config{PinPath: bpffs(b)})
	eps := interfaces(b, ns, 20)
	for _, ep := range eps {
		mustApplyIn(b, ns, d, ep, ruleSet("10.1.0.0/16", rules.AnyPort), rules.AllowAll)
	}
	fillFlows(b, d, eps, 3000)
	for b.Loop() {
		if err := ns.Do(func() error { return d.Remove(eps[0].Ifindex) }); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		mustApplyIn(b, ns, d, eps[0], ruleSet("10.1.0.0/16", rules.AnyPort), rules.AllowAll)
		fillFlows(b, d, eps[:1], 3000)
		b.StartTimer()
	}
}
