//go:build linux

package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/internal/packet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// unflattened builds a rule set whose nested prefixes do not share ports,
// so only a longest-prefix match gives the expected verdicts.
func unflattened(entries ...any) rules.RuleSet {
	rs := rules.RuleSet{Isolated: true}
	for i := 0; i+1 < len(entries); i += 2 {
		ps, ok := entries[i+1].(rules.PortSet)
		if !ok {
			ps = entries[i+1].(portList).PortSet
		}
		rs.Entries = append(rs.Entries, rules.Entry{Prefix: prefix(entries[i].(string)), Ports: ps})
	}
	return rs
}

// inFrame is a new TCP connection from peer to the pod on port.
func inFrame(peer netip.Addr, sport, port uint16) []byte {
	dst := podV4
	if peer.Is6() {
		dst = podV6
	}
	return packet.Frame{Src: peer, Dst: dst, Proto: packet.TCP, SrcPort: sport, DstPort: port, Flags: packet.SYN}.Bytes()
}

// checkAgainst runs each probe through the ingress program and compares
// the verdict with the rule set's own longest-prefix answer and with want.
func checkAgainst(t *testing.T, e *progEnv, rs rules.RuleSet, probes []cidrProbe) {
	t.Helper()
	for i, p := range probes {
		a := addr(p.peer)
		if rs.Allows(a, rules.TCP, p.port) != p.allowed {
			t.Fatalf("probe %s:%d: the rule set itself says %v", p.peer, p.port, !p.allowed)
		}
		want := uint32(drop)
		if p.allowed {
			want = pass
		}
		if got := e.run(t, "in", inFrame(a, uint16(20000+i), p.port)); got != want {
			t.Errorf("%s port %d: verdict %d, want %d", p.peer, p.port, int32(got), int32(want))
		}
	}
}

type cidrProbe struct {
	peer    string
	port    uint16
	allowed bool
}

func TestProgramsLongestPrefixAcrossLengths(t *testing.T) {
	e := newProgEnv(t)
	rs := unflattened(
		"0.0.0.0/0", ports(rules.TCP, 1, 1),
		"10.0.0.0/8", ports(rules.TCP, 8, 8),
		"10.20.0.0/16", ports(rules.TCP, 16, 16),
		"10.20.30.0/24", ports(rules.TCP, 24, 24),
		"10.20.30.128/25", ports(rules.TCP, 25, 25),
		"10.20.30.200/31", ports(rules.TCP, 31, 31),
		"10.20.30.201/32", ports(rules.TCP, 32, 32),
		"::/0", ports(rules.TCP, 1, 1),
		"fd00:1::/32", ports(rules.TCP, 32, 32),
		"fd00:1:2:3::/64", ports(rules.TCP, 64, 64),
		"fd00:1:2:3:8000::/65", ports(rules.TCP, 65, 65),
		"fd00:1:2:3:4:5:6:0/112", ports(rules.TCP, 112, 112),
		"fd00:1:2:3:4:5:6:8/127", ports(rules.TCP, 127, 127),
	)
	mustApplyIn(t, e.ns, e.d, pod, rs, rules.AllowAll)
	checkAgainst(t, e, rs, []cidrProbe{
		{"192.0.2.1", 1, true}, {"192.0.2.1", 8, false},
		{"10.9.9.9", 8, true}, {"10.9.9.9", 1, false},
		{"10.20.9.9", 16, true}, {"10.20.9.9", 8, false},
		{"10.20.30.5", 24, true}, {"10.20.30.5", 16, false}, {"10.20.30.5", 25, false},
		{"10.20.30.129", 25, true}, {"10.20.30.129", 24, false},
		{"10.20.30.200", 31, true}, {"10.20.30.200", 25, false},
		{"10.20.30.201", 32, true}, {"10.20.30.201", 31, false},
		{"10.20.30.202", 25, true}, {"10.20.30.202", 31, false},
		{"2001:db8::1", 1, true}, {"2001:db8::1", 32, false},
		{"fd00:1:ffff::1", 32, true}, {"fd00:1:ffff::1", 1, false},
		{"fd00:1:2:3::1", 64, true}, {"fd00:1:2:3::1", 32, false},
		{"fd00:1:2:3:7fff::1", 64, true}, {"fd00:1:2:3:7fff::1", 65, false},
		{"fd00:1:2:3:8000::1", 65, true}, {"fd00:1:2:3:8000::1", 64, false},
		{"fd00:1:2:3:4:5:6:1", 112, true}, {"fd00:1:2:3:4:5:6:1", 64, false},
		{"fd00:1:2:3:4:5:6:9", 127, true}, {"fd00:1:2:3:4:5:6:9", 112, false},
		{"fd00:1:2:3:4:5:6:a", 112, true}, {"fd00:1:2:3:4:5:6:a", 127, false},
		{"fd00:1:2:3:4:5:7:1", 64, true},
	})
}

func TestProgramsExceptHolesAcrossLengths(t *testing.T) {
	e := newProgEnv(t)
	var b rules.Builder
	b.AddExcept(prefix("10.0.0.0/8"), []netip.Prefix{prefix("10.1.0.0/16"), prefix("10.2.3.0/24")}, ports(rules.TCP, 80, 80).PortSet)
	b.Add(prefix("10.1.2.0/24"), ports(rules.TCP, 443, 443).PortSet)
	b.AddExcept(prefix("fd00::/48"), []netip.Prefix{prefix("fd00:0:0:1::/64")}, ports(rules.TCP, 80, 80).PortSet)
	rs := b.Build(true)
	mustApplyIn(t, e.ns, e.d, pod, rs, rules.AllowAll)
	checkAgainst(t, e, rs, []cidrProbe{
		{"10.3.0.1", 80, true},
		{"10.2.4.1", 80, true},
		{"10.2.3.1", 80, false},
		{"10.1.0.1", 80, false},
		{"10.1.2.1", 443, true},
		{"10.1.2.1", 80, false},
		{"11.0.0.1", 80, false},
		{"fd00:0:0:2::1", 80, true},
		{"fd00:0:0:1::1", 80, false},
		{"fd00:0:1::1", 80, false},
	})
}

// TestProgramsCIDRMatchesRuleSet compares the programs with the rule set's
// own longest-prefix answer for random nested prefixes of many lengths.
func TestProgramsCIDRMatchesRuleSet(t *testing.T) {
	e := newProgEnv(t)
	r := rand.New(rand.NewPCG(7, 11))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			b[0], b[1] = 0xfd, 0x00
			for i := 2; i < 16; i++ {
				b[i] = byte(r.IntN(4)) // few values: prefixes nest often
			}
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4))})
	}
	rs := rules.RuleSet{Isolated: true}
	seen := map[netip.Prefix]bool{}
	for len(rs.Entries) < 80 {
		v6 := r.IntN(2) == 1
		bits := 8 + r.IntN(24)
		if v6 {
			bits = 16 + r.IntN(112)
		}
		p := netip.PrefixFrom(randAddr(v6), bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		port := uint16(1 + len(rs.Entries))
		rs.Entries = append(rs.Entries, rules.Entry{Prefix: p, Ports: ports(rules.TCP, port, port).PortSet})
	}
	mustApplyIn(t, e.ns, e.d, pod, rs, rules.AllowAll)
	allowed := 0
	for i := range 400 {
		a := randAddr(i%2 == 1)
		port := uint16(1 + r.IntN(len(rs.Entries)))
		// Half the probes use the port of the longest match, if any.
		if i%4 < 2 {
			best := -1
			for j, en := range rs.Entries {
				if en.Prefix.Contains(a) && (best < 0 || en.Prefix.Bits() > rs.Entries[best].Prefix.Bits()) {
					best = j
				}
			}
			if best >= 0 {
				port = uint16(best + 1)
			}
		}
		want := uint32(drop)
		if rs.Allows(a, rules.TCP, port) {
			want = pass
			allowed++
		}
		if got := e.run(t, "in", inFrame(a, uint16(10000+i), port)); got != want {
			t.Errorf("%s port %d: verdict %d, want %d", a, port, int32(got), int32(want))
		}
	}
	if allowed < 50 || allowed > 350 {
		t.Fatalf("%d of 400 probes allowed: the probes do not exercise both verdicts", allowed)
	}
}

// prefixState reads what the maps hold for a policy id: its CIDR entries,
// its length sets and whether it holds its array slot.
func prefixState(t *testing.T, d *Dataplane, id uint32) (cidrs int, lens map[uint32][]uint8, slot bool) {
	t.Helper()
	var ck bpfobj.XgPeerCidrKey
	var pv bpfobj.XgPeerValue
	it := d.objs.XgPeersCidr.Iterate()
	for it.Next(&ck, &pv) {
		if ck.Policy == id {
			cidrs++
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	lens = map[uint32][]uint8{}
	var lk bpfobj.XgPrefixLensKey
	var lv bpfobj.XgPrefixLens
	lit := d.objs.XgPrefixLens.Iterate()
	for lit.Next(&lk, &lv) {
		if lk.Policy == id {
			lens[lk.Family] = append([]uint8(nil), lv.Lens[:lv.Count]...)
		}
	}
	if err := lit.Err(); err != nil {
		t.Fatal(err)
	}
	var sv bpfobj.XgPrefixSlot
	if err := d.objs.XgPrefixSlots.Lookup(id%prefixSlots, &sv); err != nil {
		t.Fatal(err)
	}
	return cidrs, lens, sv.Policy == id
}

func ingressPolicy(t *testing.T, d *Dataplane) uint32 {
	t.Helper()
	var ep bpfobj.XgEndpoint
	if err := d.objs.XgEndpoints.Lookup(uint32(testIfindex), &ep); err != nil {
		t.Fatal(err)
	}
	return ep.IngressPolicy
}

func TestPrefixLengthsFollowGenerations(t *testing.T) {
	e := newProgEnv(t)
	first := unflattened("10.0.0.0/8", ports(rules.TCP, 8, 8), "10.1.0.0/24", ports(rules.TCP, 24, 24), "fd00::/64", ports(rules.TCP, 64, 64))
	second := unflattened("10.0.0.0/16", ports(rules.TCP, 16, 16), "10.0.1.0/28", ports(rules.TCP, 28, 28))
	mustApplyIn(t, e.ns, e.d, pod, first, rules.AllowAll)
	id1 := ingressPolicy(t, e.d)
	n, lens, slot := prefixState(t, e.d, id1)
	if n != 3 || fmt.Sprint(lens) != "map[4:[24 8] 6:[64]]" || !slot {
		t.Fatalf("first generation: %d entries, lengths %v, slot %v; want 3, map[4:[24 8] 6:[64]], true", n, lens, slot)
	}
	checkAgainst(t, e, first, []cidrProbe{{"10.1.0.1", 24, true}, {"10.1.0.1", 8, false}, {"10.2.0.1", 8, true}, {"fd00::1", 64, true}})

	mustApplyIn(t, e.ns, e.d, pod, second, rules.AllowAll)
	id2 := ingressPolicy(t, e.d)
	if n, lens, slot := prefixState(t, e.d, id1); n != 0 || len(lens) != 0 || slot {
		t.Fatalf("retired generation left %d entries, lengths %v, slot %v", n, lens, slot)
	}
	n, lens, slot = prefixState(t, e.d, id2)
	if n != 2 || fmt.Sprint(lens) != "map[4:[28 16]]" || !slot {
		t.Fatalf("second generation: %d entries, lengths %v, slot %v; want 2, map[4:[28 16]], true", n, lens, slot)
	}
	checkAgainst(t, e, second, []cidrProbe{
		{"10.0.1.1", 28, true}, {"10.0.1.1", 16, false}, {"10.0.2.1", 16, true},
		{"10.1.0.1", 24, false}, {"10.2.0.1", 8, false}, {"fd00::1", 64, false},
	})
}

// A generation whose array slot another live generation holds is read
// through the hash of prefix lengths, and the holder keeps its slot.
func TestPrefixSlotTakenFallsBackToHash(t *testing.T) {
	e := newProgEnv(t)
	e.d.mu.Lock()
	holder, err := e.d.writeGeneration(unflattened("10.0.0.0/8", ports(rules.TCP, 8, 8)))
	e.d.nextID = uint64(holder) + prefixSlots
	e.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	second := unflattened("10.0.0.0/16", ports(rules.TCP, 16, 16), "fd00::/100", ports(rules.TCP, 100, 100))
	mustApplyIn(t, e.ns, e.d, pod, second, rules.AllowAll)
	id := ingressPolicy(t, e.d)
	if id%prefixSlots != holder%prefixSlots {
		t.Fatalf("ids %d and %d do not share a slot", id, holder)
	}
	if _, _, slot := prefixState(t, e.d, holder); !slot {
		t.Fatalf("generation %d lost its slot to %d", holder, id)
	}
	if n, lens, _ := prefixState(t, e.d, id); n != 2 || fmt.Sprint(lens) != "map[4:[16] 6:[100]]" {
		t.Fatalf("generation %d: %d entries, lengths %v", id, n, lens)
	}
	checkAgainst(t, e, second, []cidrProbe{
		{"10.0.0.1", 16, true}, {"10.0.0.1", 8, false}, {"10.1.0.1", 16, false}, {"10.1.0.1", 8, false},
		{"fd00::1", 100, true}, {"fd00::1:0:0:1", 100, false},
	})
}

func TestRestartRecoversPrefixLengths(t *testing.T) {
	ns := netns.Add(t, netns.Prefix()+"-cidr")
	pin := bpffs(t)
	rs := unflattened("10.0.0.0/8", ports(rules.TCP, 8, 8), "10.1.0.0/24", ports(rules.TCP, 24, 24), "fd00::/64", ports(rules.TCP, 64, 64))
	d := openIn(t, ns, Config{PinPath: pin})
	mustApplyIn(t, ns, d, pod, rs, rules.AllowAll)
	live := ingressPolicy(t, d)
	// A generation nothing refers to, as a crash between writing and
	// switching leaves it.
	d.mu.Lock()
	orphan, err := d.writeGeneration(unflattened("172.16.0.0/12", rules.AnyPort))
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	d = openIn(t, ns, Config{PinPath: pin})
	e := &progEnv{ns: ns, d: d}
	if n, lens, slot := prefixState(t, d, orphan); n != 0 || len(lens) != 0 || slot {
		t.Fatalf("orphaned generation survived recovery: %d entries, lengths %v, slot %v", n, lens, slot)
	}
	g := d.gens[live]
	if g == nil || len(g.cidr) != 3 || len(g.lens) != 2 || !g.slot {
		t.Fatalf("recovered generation %d: %+v; want 3 CIDR keys, 2 length sets and the slot", live, g)
	}
	checkAgainst(t, e, rs, []cidrProbe{{"10.1.0.1", 24, true}, {"10.1.0.1", 8, false}, {"10.2.0.1", 8, true}, {"fd00::1", 64, true}, {"fd01::1", 64, false}})

	// The recovered bookkeeping is complete: the next switch leaves nothing.
	mustApplyIn(t, ns, d, pod, unflattened("192.168.0.0/16", rules.AnyPort), rules.AllowAll)
	if n, lens, slot := prefixState(t, d, live); n != 0 || len(lens) != 0 || slot {
		t.Fatalf("recovered generation not deleted: %d entries, lengths %v, slot %v", n, lens, slot)
	}
}
