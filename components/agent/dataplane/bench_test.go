//go:build linux

package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/internal/packet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// benchRuleSet has 10,000 entries: 9,000 exact peer addresses (pods) in
// three port sets and 1,000 CIDRs, plus whatever extra entries are given.
func benchRuleSet(extra ...netip.Addr) rules.RuleSet {
	var b rules.Builder
	sets := []rules.PortSet{
		ports(rules.TCP, 80, 80, 443, 443).PortSet,
		ports(rules.UDP, 53, 53).union(ports(rules.TCP, 53, 53)),
		ports(rules.TCP, 5432, 5432).union(ports(rules.SCTP, 3868, 3868)),
	}
	for i := range 9000 - len(extra) {
		a := netip.AddrFrom4([4]byte{10, byte(64 + i/250), byte(i % 250), 1})
		b.Add(netip.PrefixFrom(a, 32), sets[i%3])
	}
	for _, a := range extra {
		b.Add(netip.PrefixFrom(a, a.BitLen()), rules.AnyPort)
	}
	for i := range 1000 {
		b.Add(netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + i/256), byte(i % 256), 0}), 24), ports(rules.TCP, 8000, 9000).PortSet)
	}
	rs := b.Build(true)
	if len(rs.Entries) != 10000 {
		panic(fmt.Sprintf("bench rule set has %d entries", len(rs.Entries)))
	}
	return rs
}

// BenchmarkProgram measures the tc programs per packet with
// BPF_PROG_TEST_RUN, with 10,000 entries in each direction's rule set.
func BenchmarkProgram(b *testing.B) {
	ns := netns.Add(b, netns.Prefix()+"-bench")
	d := openIn(b, ns, Config{PinPath: bpffs(b)})
	rs := benchRuleSet()
	mustApplyIn(b, ns, d, pod, rs, rs)
	// Service frontends as on a node: the service CIDRs of both families
	// and 200 load-balancer addresses. No case below sends to one.
	frontends := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
	for i := range 200 {
		frontends = append(frontends, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(100 + i/250), byte(i % 250)}), 32))
	}
	if err := d.SetFrontends(frontends); err != nil {
		b.Fatal(err)
	}
	peer := "10.70.102.1" // exact entry 1602: TCP 80 and 443
	cases := []struct {
		name  string
		dir   string
		frame []byte
		want  uint32
	}{
		{"egress/tracked-flow", "out", tcpFrame("10.0.0.1", peer, 40000, 443, packet.ACK), pass},
		{"ingress/reply", "in", tcpFrame(peer, "10.0.0.1", 443, 40000, packet.ACK), pass},
		{"egress/new-flow-exact-peer-denied-port", "out", tcpFrame("10.0.0.1", peer, 40001, 444, packet.SYN), drop},
		{"egress/new-flow-cidr-peer-denied-port", "out", tcpFrame("10.0.0.1", "172.17.3.9", 40001, 7999, packet.SYN), drop},
		{"egress/new-flow-no-peer", "out", tcpFrame("10.0.0.1", "192.0.2.1", 40001, 80, packet.SYN), drop},
		{"egress/new-udp-flow-cidr-peer-denied-port", "out", l4Frame(packet.UDP, "10.0.0.1", "172.17.3.9", 40001, 7999), drop},
		{"ingress/new-flow-cidr-peer-denied-port", "in", tcpFrame("172.17.3.9", "10.0.0.1", 40001, 7999, packet.SYN), drop},
		{"egress/udp-tracked-flow", "out", l4Frame(packet.UDP, "10.0.0.1", "10.64.1.1", 5353, 53), pass},
	}
	// Open the tracked flows once; the benchmark then sees later packets.
	for _, f := range [][]byte{tcpFrame("10.0.0.1", peer, 40000, 443, packet.SYN), cases[len(cases)-1].frame} {
		if ret, _, err := d.objs.XgFromPod.Benchmark(f, 1, nil); err != nil || ret != pass {
			b.Fatalf("opening a flow: %d, %v", int32(ret), err)
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			prog := d.objs.XgFromPod
			if c.dir == "in" {
				prog = d.objs.XgToPod
			}
			ret, per, err := prog.Benchmark(c.frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ret != c.want {
				b.Fatalf("verdict %d, want %d", int32(ret), int32(c.want))
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/packet")
		})
	}
}

// BenchmarkApply measures one policy switch of a pod whose ingress and
// egress rule sets have 10,000 entries each: write the new generation,
// switch, wait for the grace period, delete the old one.
func BenchmarkApply(b *testing.B) {
	ns := netns.Add(b, netns.Prefix()+"-bench")
	d := openIn(b, ns, Config{PinPath: bpffs(b)})
	sets := []rules.RuleSet{benchRuleSet(), benchRuleSet(addr("192.0.2.1"))}
	i := 0
	for b.Loop() {
		mustApplyIn(b, ns, d, pod, sets[i%2], sets[i%2])
		i++
	}
}

// BenchmarkTCPThroughput compares TCP throughput between two pod namespaces
// with no programs and with the dataplane enforcing 10,000-entry rule sets
// on both pods in both directions. Run it with -benchtime=1x: it alternates
// several timed rounds itself and reports medians and their ratio.
func BenchmarkTCPThroughput(b *testing.B) {
	const rounds, length = 9, 2 * time.Second
	node := netns.NewNode(b, 2)
	a, srv := node.Pods[0], node.Pods[1]
	var received atomic.Int64
	if err := srv.NS.Do(func() error {
		l, err := net.Listen("tcp", ":5001")
		if err != nil {
			return err
		}
		b.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 1<<20)
					for {
						n, err := c.Read(buf)
						received.Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
			}
		}()
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	measure := func() float64 {
		c, err := dial(a, ap(srv.V4, 5001), time.Second)
		if err != nil {
			b.Fatalf("connecting: %v", err)
		}
		buf := make([]byte, 256<<10)
		start := received.Load()
		t0 := time.Now()
		for time.Since(t0) < length {
			if _, err := c.Write(buf); err != nil {
				b.Fatalf("sending: %v", err)
			}
		}
		elapsed := time.Since(t0)
		bytes := received.Load() - start
		c.Close()
		return float64(bytes) * 8 / elapsed.Seconds() / 1e9
	}
	pin := bpffs(b)
	enforce := func() *Dataplane {
		var d *Dataplane
		err := node.NS.Do(func() (err error) {
			if d, err = Open(Config{PinPath: pin}); err != nil {
				return err
			}
			if err := d.Apply(endpointOf(a), benchRuleSet(), benchRuleSet(srv.V4)); err != nil {
				return err
			}
			return d.Apply(endpointOf(srv), benchRuleSet(a.V4), benchRuleSet())
		})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	var none, policy []float64
	for range b.N {
		for range rounds {
			none = append(none, measure())
			d := enforce()
			policy = append(policy, measure())
			if err := node.NS.Do(d.Uninstall); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("no program: %.2f Gbit/s per round %v", median(none), roundTo(none))
	b.Logf("enforcing:  %.2f Gbit/s per round %v", median(policy), roundTo(policy))
	b.ReportMetric(median(none), "Gbit/s-none")
	b.ReportMetric(median(policy), "Gbit/s-enforced")
	b.ReportMetric(median(policy)/median(none), "ratio")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundTo(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}
