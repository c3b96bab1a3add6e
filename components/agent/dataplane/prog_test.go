//go:build linux

package dataplane

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/internal/packet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Verdicts as the tc programs return them.
const (
	pass = ^uint32(0) // TC_ACT_UNSPEC: continue to the next program
	drop = 2          // TC_ACT_SHOT
)

// BPF_PROG_TEST_RUN runs a program on loopback unless told otherwise, so the
// endpoint under test is interface 1 of a private namespace.
const testIfindex = 1

var (
	podV4 = addr("10.0.0.1")
	podV6 = addr("fd00::1")
	pod   = Endpoint{Ifindex: testIfindex, Addrs: []netip.Addr{podV4, podV6}}
)

type progEnv struct {
	ns *netns.NS
	d  *Dataplane
}

func newProgEnv(t *testing.T) *progEnv {
	ns := netns.Add(t, netns.Prefix()+"-prog")
	return &progEnv{ns: ns, d: openIn(t, ns, Config{PinPath: bpffs(t)})}
}

// run runs one frame through the program of a direction.
func (e *progEnv) run(t *testing.T, dir string, f []byte) uint32 {
	t.Helper()
	prog := e.d.objs.XgFromPod
	if dir == "in" {
		prog = e.d.objs.XgToPod
	}
	var ret uint32
	err := e.ns.Do(func() (err error) {
		ret, err = prog.Run(&ebpf.RunOptions{Data: f})
		return err
	})
	if err != nil {
		t.Fatalf("running %s program: %v", dir, err)
	}
	return ret
}

func tcpFrame(src, dst string, sport, dport uint16, flags uint8) []byte {
	return packet.Frame{Src: addr(src), Dst: addr(dst), Proto: packet.TCP, SrcPort: sport, DstPort: dport, Flags: flags}.Bytes()
}

func l4Frame(proto uint8, src, dst string, sport, dport uint16) []byte {
	return packet.Frame{Src: addr(src), Dst: addr(dst), Proto: proto, SrcPort: sport, DstPort: dport}.Bytes()
}

type frameCase struct {
	name  string
	dir   string // "out": from the pod (egress policy), "in": to the pod
	frame []byte
	want  uint32
}

func runCases(t *testing.T, e *progEnv, cases []frameCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.run(t, tc.dir, tc.frame); got != tc.want {
				t.Fatalf("verdict %d, want %d", int32(got), int32(tc.want))
			}
		})
	}
}

func TestProgramsAllowAndDeny(t *testing.T) {
	e := newProgEnv(t)
	egress := ruleSet(
		"10.1.0.0/16", rules.AnyPort,
		"10.2.0.0/16", ports(rules.TCP, 80, 80, 8000, 8100),
		"10.3.0.0/16", ports(rules.UDP, 1000, 2000),
		"10.4.0.0/16", ports(rules.SCTP, 80, 80),
		"fd01::/64", ports(rules.TCP, 443, 443),
		"fd02::5/128", ports(rules.UDP, 53, 53),
	)
	var b rules.Builder
	b.AddExcept(prefix("10.5.0.0/16"), []netip.Prefix{prefix("10.5.2.0/24")}, ports(rules.TCP, 22, 22).PortSet)
	b.Add(prefix("10.5.2.7/32"), ports(rules.TCP, 23, 23).PortSet)
	ingress := b.Build(true)
	mustApplyIn(t, e.ns, e.d, pod, ingress, egress)

	runCases(t, e, []frameCase{
		{"v4 any port", "out", tcpFrame("10.0.0.1", "10.1.9.9", 40000, 1, packet.SYN), pass},
		{"v4 icmp to any-port peer", "out", packet.Frame{Src: podV4, Dst: addr("10.1.9.9"), Proto: packet.ICMP, ICMPType: 8, ICMPID: 7}.Bytes(), pass},
		{"v4 tcp port allowed", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 80, packet.SYN), pass},
		{"v4 tcp range allowed", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 8050, packet.SYN), pass},
		{"v4 tcp range end", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 8100, packet.SYN), pass},
		{"v4 tcp past range", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 8101, packet.SYN), drop},
		{"v4 tcp other port", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 81, packet.SYN), drop},
		{"v4 udp not tcp", "out", l4Frame(packet.UDP, "10.0.0.1", "10.2.0.1", 40000, 80), drop},
		{"v4 icmp needs any port", "out", packet.Frame{Src: podV4, Dst: addr("10.2.0.1"), Proto: packet.ICMP, ICMPType: 8}.Bytes(), drop},
		{"v4 udp range", "out", l4Frame(packet.UDP, "10.0.0.1", "10.3.3.3", 5000, 1500), pass},
		{"v4 udp below range", "out", l4Frame(packet.UDP, "10.0.0.1", "10.3.3.3", 5000, 999), drop},
		{"v4 sctp allowed", "out", l4Frame(packet.SCTP, "10.0.0.1", "10.4.0.1", 5000, 80), pass},
		{"v4 tcp is not sctp", "out", tcpFrame("10.0.0.1", "10.4.0.1", 5000, 80, packet.SYN), drop},
		{"v4 unknown peer", "out", tcpFrame("10.0.0.1", "10.9.0.1", 40000, 80, packet.SYN), drop},
		{"v4 fragment to port-restricted peer", "out", packet.Frame{Src: podV4, Dst: addr("10.2.0.1"), Proto: packet.TCP, FragOffset: 10}.Bytes(), drop},
		{"v4 fragment to any-port peer", "out", packet.Frame{Src: podV4, Dst: addr("10.1.0.1"), Proto: packet.TCP, FragOffset: 10}.Bytes(), pass},
		{"v6 tcp allowed", "out", tcpFrame("fd00::1", "fd01::9", 40000, 443, packet.SYN), pass},
		{"v6 tcp other port", "out", tcpFrame("fd00::1", "fd01::9", 40000, 444, packet.SYN), drop},
		{"v6 outside prefix", "out", tcpFrame("fd00::1", "fd01:0:0:1::9", 40000, 443, packet.SYN), drop},
		{"v6 exact udp", "out", l4Frame(packet.UDP, "fd00::1", "fd02::5", 5353, 53), pass},
		{"v6 exact neighbour", "out", l4Frame(packet.UDP, "fd00::1", "fd02::6", 5353, 53), drop},
		{"v6 hop-by-hop header", "out", packet.Frame{Src: podV6, Dst: addr("fd01::9"), Proto: packet.TCP, DstPort: 443, Flags: packet.SYN, HopByHop: true}.Bytes(), pass},
		{"v6 sctp not allowed", "out", l4Frame(packet.SCTP, "fd00::1", "fd01::9", 5000, 443), drop},
		{"v4-mapped v6 is not v4", "out", tcpFrame("fd00::1", "::ffff:10.1.0.1", 40000, 80, packet.SYN), drop},
		{"cidr except: outside the hole", "in", tcpFrame("10.5.3.3", "10.0.0.1", 40000, 22, packet.SYN), pass},
		{"cidr except: in the hole", "in", tcpFrame("10.5.2.3", "10.0.0.1", 40000, 22, packet.SYN), drop},
		{"cidr except: rule inside the hole", "in", tcpFrame("10.5.2.7", "10.0.0.1", 40000, 23, packet.SYN), pass},
		{"cidr except: hole keeps other ports", "in", tcpFrame("10.5.2.7", "10.0.0.1", 40000, 22, packet.SYN), drop},
		{"arp passes", "out", packet.ARP(), pass},
	})
}

func TestProgramsReplies(t *testing.T) {
	e := newProgEnv(t)
	// Egress to 10.2.0.0/16 port 80 only; ingress deny-all.
	mustApplyIn(t, e.ns, e.d, pod, rules.DenyAll, ruleSet("10.2.0.0/16", ports(rules.TCP, 80, 80), "fd02::/64", ports(rules.UDP, 53, 53)))
	runCases(t, e, []frameCase{
		{"reply before any request", "in", tcpFrame("10.2.0.1", "10.0.0.1", 80, 40000, packet.SYN|packet.ACK), drop},
		{"request", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 80, packet.SYN), pass},
		{"reply", "in", tcpFrame("10.2.0.1", "10.0.0.1", 80, 40000, packet.SYN|packet.ACK), pass},
		{"bare SYN on the reply tuple is a new connection", "in", tcpFrame("10.2.0.1", "10.0.0.1", 80, 40000, packet.SYN), drop},
		{"same peer, other port", "in", tcpFrame("10.2.0.1", "10.0.0.1", 81, 40000, packet.ACK), drop},
		{"same peer, other pod port", "in", tcpFrame("10.2.0.1", "10.0.0.1", 80, 40001, packet.ACK), drop},
		{"v6 udp request", "out", l4Frame(packet.UDP, "fd00::1", "fd02::9", 5353, 53), pass},
		{"v6 udp reply", "in", l4Frame(packet.UDP, "fd02::9", "fd00::1", 53, 5353), pass},
		{"v6 udp from another peer", "in", l4Frame(packet.UDP, "fd02::8", "fd00::1", 53, 5353), drop},
	})

	// The policy changes so that 10.2.0.0/16 is no longer allowed: the
	// tracked flow must not let its "replies" in any more.
	mustApplyIn(t, e.ns, e.d, pod, rules.DenyAll, ruleSet("fd02::/64", ports(rules.UDP, 53, 53)))
	runCases(t, e, []frameCase{
		{"stale flow after revocation", "in", tcpFrame("10.2.0.1", "10.0.0.1", 80, 40000, packet.ACK), drop},
		{"request after revocation", "out", tcpFrame("10.0.0.1", "10.2.0.1", 40000, 80, packet.ACK), drop},
		{"flow the new policy still allows", "in", l4Frame(packet.UDP, "fd02::9", "fd00::1", 53, 5353), pass},
	})
}

func TestProgramsIngressReplies(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, ruleSet("10.7.0.0/16", ports(rules.SCTP, 9000, 9000)), rules.DenyAll)
	runCases(t, e, []frameCase{
		{"sctp request in", "in", l4Frame(packet.SCTP, "10.7.0.1", "10.0.0.1", 5000, 9000), pass},
		{"sctp reply out", "out", l4Frame(packet.SCTP, "10.0.0.1", "10.7.0.1", 9000, 5000), pass},
		{"pod opens its own flow", "out", l4Frame(packet.SCTP, "10.0.0.1", "10.7.0.1", 9000, 5001), drop},
	})
}

func TestProgramsNotIsolated(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, rules.AllowAll, rules.DenyAll)
	runCases(t, e, []frameCase{
		{"ingress open", "in", tcpFrame("10.9.9.9", "10.0.0.1", 1, 2, packet.SYN), pass},
		{"egress closed", "out", tcpFrame("10.0.0.1", "10.9.9.9", 2, 3, packet.SYN), drop},
		{"reply to the open direction", "out", tcpFrame("10.0.0.1", "10.9.9.9", 2, 1, packet.SYN|packet.ACK), pass},
	})
}

func TestProgramsAntiSpoofing(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, rules.AllowAll, rules.AllowAll)
	runCases(t, e, []frameCase{
		{"own v4 source", "out", tcpFrame("10.0.0.1", "10.9.9.9", 1, 2, packet.SYN), pass},
		{"foreign v4 source", "out", tcpFrame("10.0.0.2", "10.9.9.9", 1, 2, packet.SYN), drop},
		{"foreign v6 source", "out", tcpFrame("fd00::2", "fd09::9", 1, 2, packet.SYN), drop},
		{"link-local v6 source", "out", packet.Frame{Src: addr("fe80::1"), Dst: addr("ff02::2"), Proto: packet.ICMPv6, ICMPType: 133}.Bytes(), pass},
		{"foreign source toward the pod is fine", "in", tcpFrame("10.0.0.2", "10.0.0.1", 1, 2, packet.SYN), pass},
	})
	ep := pod
	ep.AnySource = true
	mustApplyIn(t, e.ns, e.d, ep, rules.AllowAll, rules.AllowAll)
	runCases(t, e, []frameCase{{"any source when allowed", "out", tcpFrame("10.0.0.2", "10.9.9.9", 1, 2, packet.SYN), pass}})
}

// TestProgramsAntiSpoofingAddressChanges covers both ways a source is
// checked: a pod's only IPv4 address is carried in its endpoint entry, and
// every other address (IPv6, a second IPv4) is looked up in xg_ep_addrs.
func TestProgramsAntiSpoofingAddressChanges(t *testing.T) {
	e := newProgEnv(t)
	ep := Endpoint{Ifindex: testIfindex, Addrs: []netip.Addr{podV4, podV6}}
	mustApplyIn(t, e.ns, e.d, ep, rules.AllowAll, rules.AllowAll)
	if v, _ := e.d.endpoint(testIfindex); v.Flags&flagAddr4 == 0 || netip.AddrFrom4(v.Addr4) != podV4 {
		t.Fatalf("endpoint entry %+v does not carry %s", v, podV4)
	}
	runCases(t, e, []frameCase{
		{"own v4 source", "out", tcpFrame("10.0.0.1", "10.9.9.9", 1, 2, packet.SYN), pass},
		{"own v6 source", "out", tcpFrame("fd00::1", "fd09::9", 1, 2, packet.SYN), pass},
		{"foreign v4 source", "out", tcpFrame("10.0.0.3", "10.9.9.9", 1, 2, packet.SYN), drop},
	})

	ep.Addrs = []netip.Addr{addr("10.0.0.3")}
	mustApplyIn(t, e.ns, e.d, ep, rules.AllowAll, rules.AllowAll)
	runCases(t, e, []frameCase{
		{"new address", "out", tcpFrame("10.0.0.3", "10.9.9.9", 3, 2, packet.SYN), pass},
		{"address the pod gave up", "out", tcpFrame("10.0.0.1", "10.9.9.9", 3, 2, packet.SYN), drop},
		{"v6 address the pod gave up", "out", tcpFrame("fd00::1", "fd09::9", 3, 2, packet.SYN), drop},
	})

	ep.Addrs = []netip.Addr{addr("10.0.0.3"), addr("10.0.0.4")}
	mustApplyIn(t, e.ns, e.d, ep, rules.AllowAll, rules.AllowAll)
	if v, _ := e.d.endpoint(testIfindex); v.Flags&flagAddr4 != 0 {
		t.Fatalf("endpoint entry %+v carries one of two IPv4 addresses", v)
	}
	runCases(t, e, []frameCase{
		{"first of two v4 addresses", "out", tcpFrame("10.0.0.3", "10.9.9.9", 4, 2, packet.SYN), pass},
		{"second of two v4 addresses", "out", tcpFrame("10.0.0.4", "10.9.9.9", 4, 2, packet.SYN), pass},
		{"neither", "out", tcpFrame("10.0.0.5", "10.9.9.9", 4, 2, packet.SYN), drop},
	})
}

func TestProgramsNeighbourDiscoveryUnderDenyAll(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, rules.DenyAll, rules.DenyAll)
	runCases(t, e, []frameCase{
		{"neighbour solicitation out", "out", packet.Frame{Src: podV6, Dst: addr("ff02::1:ff00:1"), Proto: packet.ICMPv6, ICMPType: 135}.Bytes(), pass},
		{"neighbour advertisement in", "in", packet.Frame{Src: addr("fe80::1"), Dst: podV6, Proto: packet.ICMPv6, ICMPType: 136}.Bytes(), pass},
		{"echo request out", "out", packet.Frame{Src: podV6, Dst: addr("fd09::1"), Proto: packet.ICMPv6, ICMPType: 128}.Bytes(), drop},
		{"malformed ipv4", "out", malformedIPv4(), drop},
	})
}

func TestProgramsDeferServiceAddresses(t *testing.T) {
	e := newProgEnv(t)
	if err := e.d.SetFrontends([]netip.Prefix{prefix("10.96.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	mustApplyIn(t, e.ns, e.d, pod, rules.DenyAll, ruleSet("10.2.0.0/16", rules.AnyPort))
	before, _ := e.d.Stats()
	runCases(t, e, []frameCase{
		{"service address is judged after DNAT", "out", tcpFrame("10.0.0.1", "10.96.0.10", 40000, 80, packet.SYN), pass},
		{"other address judged now", "out", tcpFrame("10.0.0.1", "10.97.0.10", 40000, 80, packet.SYN), drop},
	})
	after, err := e.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Deferred != before.Deferred+1 || after.Denied != before.Denied+1 {
		t.Fatalf("stats %+v after %+v: want one more deferred and denied", after, before)
	}
}

func TestApplyFallsBackToDenyAll(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, rules.AllowAll, ruleSet("10.1.0.0/16", rules.AnyPort))
	var wide rules.PortSet
	for p := range uint16(maxPortRanges + 1) {
		wide.Ranges = append(wide.Ranges, rules.PortRange{Protocol: rules.TCP, First: 2 * p, Last: 2 * p})
	}
	err := applyIn(t, e.ns, e.d, pod, rules.AllowAll, ruleSet("10.1.0.0/16", wide.Normalize()))
	if !errors.Is(err, ErrDenyAll) || !errors.Is(err, ErrTooManyPortRanges) {
		t.Fatalf("Apply error = %v, want ErrDenyAll wrapping ErrTooManyPortRanges", err)
	}
	runCases(t, e, []frameCase{
		{"egress denied", "out", tcpFrame("10.0.0.1", "10.1.0.1", 1, 2, packet.SYN), drop},
		{"ingress denied", "in", tcpFrame("10.1.0.1", "10.0.0.1", 1, 2, packet.SYN), drop},
	})
	if n := e.d.generationCount(); n != 0 {
		t.Fatalf("%d generations left in the maps, want 0", n)
	}
}

// malformedIPv4 has a header length below the minimum.
func malformedIPv4() []byte {
	f := tcpFrame("10.0.0.1", "10.1.0.1", 1, 2, packet.SYN)
	f[14] = 0x42
	return f
}

// icmpError builds an ICMP error from peer to the pod (or the reverse)
// quoting the packet that caused it.
func icmpError(src, dst string, typ uint8, quoted packet.Frame) []byte {
	proto := uint8(packet.ICMP)
	if addr(src).Is6() {
		proto = packet.ICMPv6
	}
	return packet.Frame{Src: addr(src), Dst: addr(dst), Proto: proto, ICMPType: typ, Payload: quoted.IP()}.Bytes()
}

func TestProgramsICMPErrorsOfTrackedFlows(t *testing.T) {
	e := newProgEnv(t)
	mustApplyIn(t, e.ns, e.d, pod, rules.DenyAll, ruleSet("10.2.0.0/16", ports(rules.TCP, 443, 443).PortSet, "fd02::/64", ports(rules.UDP, 53, 53).PortSet))
	out4 := packet.Frame{Src: podV4, Dst: addr("10.2.0.1"), Proto: packet.TCP, SrcPort: 40000, DstPort: 443, Flags: packet.SYN}
	out6 := packet.Frame{Src: podV6, Dst: addr("fd02::9"), Proto: packet.UDP, SrcPort: 5353, DstPort: 53}
	other := packet.Frame{Src: podV4, Dst: addr("10.2.0.1"), Proto: packet.TCP, SrcPort: 40001, DstPort: 443}
	runCases(t, e, []frameCase{
		{"fragmentation needed before the flow exists", "in", icmpError("10.9.9.9", "10.0.0.1", 3, out4), drop},
		{"open tcp flow", "out", out4.Bytes(), pass},
		{"open udp flow", "out", out6.Bytes(), pass},
		{"fragmentation needed for the flow", "in", icmpError("10.9.9.9", "10.0.0.1", 3, out4), pass},
		{"packet too big for the flow", "in", icmpError("fd09::1", "fd00::1", 2, out6), pass},
		{"error quoting another flow", "in", icmpError("10.9.9.9", "10.0.0.1", 3, other), drop},
		{"echo request is not an error", "in", packet.Frame{Src: addr("10.2.0.1"), Dst: podV4, Proto: packet.ICMP, ICMPType: 8}.Bytes(), drop},
	})
}
