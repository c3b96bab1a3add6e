//go:build linux

package dataplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// kubeProxyDNAT installs what kube-proxy's iptables mode would for a
// ClusterIP service: DNAT from vip:port to the endpoints, spread evenly.
func kubeProxyDNAT(t *testing.T, node *netns.Node, vip netip.Addr, port int, endpoints ...netip.AddrPort) {
	t.Helper()
	cmd := "iptables"
	if vip.Is6() {
		cmd = "ip6tables"
	}
	for i, ep := range endpoints {
		args := []string{cmd, "-w", "-t", "nat", "-A", "PREROUTING", "-d", vip.String(), "-p", "tcp", "--dport", fmt.Sprint(port)}
		if left := len(endpoints) - i; left > 1 {
			args = append(args, "-m", "statistic", "--mode", "nth", "--every", fmt.Sprint(left), "--packet", "0")
		}
		node.NS.MustRun(t, append(args, "-j", "DNAT", "--to-destination", ep.String())...)
	}
}

// TestServiceTrafficJudgedAfterDNAT: a pod's connection to a Service
// address is allowed exactly when its egress policy allows the endpoint the
// connection reaches, whatever the policy says about the Service address.
func TestServiceTrafficJudgedAfterDNAT(t *testing.T) {
	node := netns.NewNode(t, 3)
	a, b, c := node.Pods[0], node.Pods[1], node.Pods[2]
	startServer(t, b, []int{8080}, nil)
	startServer(t, c, []int{8080}, nil)
	var (
		toB   = netip.MustParseAddr("10.96.0.1")
		toC   = netip.MustParseAddr("10.96.0.2")
		toBC  = netip.MustParseAddr("10.96.0.3")
		toB6  = netip.MustParseAddr("fd96::1")
		other = netip.MustParseAddr("10.97.0.1") // DNATed, but not a known frontend
	)
	kubeProxyDNAT(t, node, toB, 80, ap(b.V4, 8080))
	kubeProxyDNAT(t, node, toC, 80, ap(c.V4, 8080))
	kubeProxyDNAT(t, node, toBC, 80, ap(b.V4, 8080), ap(c.V4, 8080))
	kubeProxyDNAT(t, node, toB6, 80, ap(b.V6, 8080))
	kubeProxyDNAT(t, node, other, 80, ap(b.V4, 8080))

	d := openIn(t, node.NS, Config{PinPath: bpffs(t)})
	if err := d.SetFrontends([]netip.Prefix{prefix("10.96.0.0/16"), prefix("fd96::/112")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range node.Pods {
		mustApplyIn(t, node.NS, d, endpointOf(p), rules.AllowAll, rules.AllowAll)
	}

	t.Run("egress allows only b", func(t *testing.T) {
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, ruleSet(
			b.V4.String()+"/32", ports(rules.TCP, 8080, 8080), b.V6.String()+"/128", ports(rules.TCP, 8080, 8080)))
		checkProbes(t, []probe{
			{"service of b", a, ap(toB, 80), false, "pod1"},
			{"service of b over v6", a, ap(toB6, 80), false, "pod1"},
			{"service of c", a, ap(toC, 80), false, ""},
			{"b directly", a, ap(b.V4, 8080), false, "pod1"},
			{"c directly", a, ap(c.V4, 8080), false, ""},
			{"unknown frontend judged by its address", a, ap(other, 80), false, ""},
		})
		// Through the shared service, every connection that works reached
		// b, and those that reached c failed.
		ok := 0
		for range 8 {
			got, err := tcpHello(a, ap(toBC, 80))
			if err == nil {
				if got != "pod1" {
					t.Fatalf("connection through the shared service reached %q", got)
				}
				ok++
			}
		}
		if ok == 0 || ok == 8 {
			t.Fatalf("%d of 8 connections through the shared service worked, want some but not all", ok)
		}
	})

	t.Run("a block that covers the service address but not the endpoint", func(t *testing.T) {
		var bld rules.Builder
		bld.AddExcept(prefix("0.0.0.0/0"), []netip.Prefix{prefix("10.200.0.0/24")}, rules.AnyPort)
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, bld.Build(true))
		checkProbes(t, []probe{{"service of b", a, ap(toB, 80), false, ""}})
	})

	t.Run("ingress sees the client's own address", func(t *testing.T) {
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, rules.AllowAll)
		mustApplyIn(t, node.NS, d, endpointOf(b), ruleSet(a.V4.String()+"/32", ports(rules.TCP, 8080, 8080)), rules.AllowAll)
		checkProbes(t, []probe{
			{"a to service of b", a, ap(toB, 80), false, "pod1"},
			{"c to service of b", c, ap(toB, 80), false, ""},
		})
	})

	t.Run("established service flow across policy changes", func(t *testing.T) {
		mustApplyIn(t, node.NS, d, endpointOf(b), rules.AllowAll, rules.AllowAll)
		allowB := func(extra string) rules.RuleSet {
			return ruleSet(b.V4.String()+"/32", ports(rules.TCP, 8080, 8080), extra, rules.AnyPort)
		}
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, allowB("192.0.2.1/32"))
		conn, err := dial(a, ap(toB, 80), time.Second)
		if err != nil {
			t.Fatalf("connecting to the service: %v", err)
		}
		defer conn.Close()
		echo := echoer(t, conn, "pod1", 500*time.Millisecond)
		if err := echo(); err != nil {
			t.Fatalf("echo before the change: %v", err)
		}
		// A new policy that still allows b: the replies, which come from
		// the service address, are revalidated against b and pass.
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, allowB("192.0.2.2/32"))
		if err := echo(); err != nil {
			t.Fatalf("echo after a change that still allows b: %v", err)
		}
		// A policy without b: the established connection stops.
		mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, ruleSet("192.0.2.2/32", rules.AnyPort))
		if err := echo(); err == nil {
			t.Fatal("echo worked after the policy stopped allowing b")
		}
	})

	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PostNATAllowed == 0 || st.PostNATDenied == 0 || st.Deferred == 0 {
		t.Fatalf("stats %+v: the post-DNAT program did not judge anything", st)
	}
}

// TestDeferredWithoutConntrack: with no NAT rules the node has no connection
// tracking, and the post-DNAT program judges deferred packets from their
// own headers.
func TestDeferredWithoutConntrack(t *testing.T) {
	node := netns.NewNode(t, 3)
	a, b, c := node.Pods[0], node.Pods[1], node.Pods[2]
	startServer(t, b, []int{8080, 9090}, nil)
	startServer(t, c, []int{8080}, nil)
	d := openIn(t, node.NS, Config{PinPath: bpffs(t)})
	// Every pod address counts as a frontend, so every packet from a is
	// deferred to the netfilter program.
	if err := d.SetFrontends([]netip.Prefix{prefix("10.200.0.0/24"), prefix("fd00:200::/64")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*netns.Pod{b, c} {
		mustApplyIn(t, node.NS, d, endpointOf(p), rules.AllowAll, rules.AllowAll)
	}
	mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, ruleSet(
		b.V4.String()+"/32", ports(rules.TCP, 8080, 8080), b.V6.String()+"/128", ports(rules.TCP, 8080, 8080)))
	before, _ := d.Stats()
	checkProbes(t, []probe{
		{"allowed port v4", a, ap(b.V4, 8080), false, "pod1"},
		{"allowed port v6", a, ap(b.V6, 8080), false, "pod1"},
		{"other port", a, ap(b.V4, 9090), false, ""},
		{"other pod", a, ap(c.V4, 8080), false, ""},
		{"other pod v6", a, ap(c.V6, 8080), false, ""},
	})
	after, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.PostNATDenied == before.PostNATDenied || after.PostNATAllowed == before.PostNATAllowed {
		t.Fatalf("stats %+v then %+v: the post-DNAT program did not decide", before, after)
	}
}
