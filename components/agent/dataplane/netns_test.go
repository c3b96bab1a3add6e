//go:build linux

package dataplane

import (
	"testing"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

func endpointOf(p *netns.Pod) Endpoint { return Endpoint{Ifindex: p.Ifindex, Addrs: p.Addrs()} }

func TestTrafficBetweenNamespaces(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode AttachMode
	}{{"tcx", AttachTCX}, {"clsact", AttachClsact}} {
		t.Run(mode.name, func(t *testing.T) {
			node := netns.NewNode(t, 3)
			a, b, c := node.Pods[0], node.Pods[1], node.Pods[2]
			startServer(t, b, []int{8080, 9090}, []int{5353})
			startServer(t, c, []int{8080}, nil)
			d := openIn(t, node.NS, Config{PinPath: bpffs(t), Attach: mode.mode})

			// b admits a on TCP 8080 and UDP 5353, by both addresses.
			bIngress := ruleSet(
				a.V4.String()+"/32", ports(rules.TCP, 8080, 8080).union(ports(rules.UDP, 5353, 5353)),
				a.V6.String()+"/128", ports(rules.TCP, 8080, 8080).union(ports(rules.UDP, 5353, 5353)),
			)
			mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, rules.AllowAll)
			mustApplyIn(t, node.NS, d, endpointOf(b), bIngress, rules.AllowAll)
			mustApplyIn(t, node.NS, d, endpointOf(c), rules.AllowAll, rules.AllowAll)
			checkProbes(t, []probe{
				{"a to b tcp v4", a, ap(b.V4, 8080), false, "pod1"},
				{"a to b tcp v6", a, ap(b.V6, 8080), false, "pod1"},
				{"a to b other port", a, ap(b.V4, 9090), false, ""},
				{"c to b tcp v4", c, ap(b.V4, 8080), false, ""},
				{"c to b tcp v6", c, ap(b.V6, 8080), false, ""},
				{"a to b udp v4", a, ap(b.V4, 5353), true, "pod1"},
				{"a to b udp v6", a, ap(b.V6, 5353), true, "pod1"},
				{"c to b udp", c, ap(b.V4, 5353), true, ""},
				{"a to c, nobody isolated", a, ap(c.V4, 8080), false, "pod2"},
			})

			// a's egress now admits only b's TCP 8080.
			mustApplyIn(t, node.NS, d, endpointOf(a), rules.AllowAll, ruleSet(
				b.V4.String()+"/32", ports(rules.TCP, 8080, 8080), b.V6.String()+"/128", ports(rules.TCP, 8080, 8080)))
			checkProbes(t, []probe{
				{"a to b still", a, ap(b.V4, 8080), false, "pod1"},
				{"a to c egress denied", a, ap(c.V4, 8080), false, ""},
				{"a to c v6 egress denied", a, ap(c.V6, 8080), false, ""},
				{"a to b udp egress denied", a, ap(b.V4, 5353), true, ""},
			})

			// Unmanaged, b is open again.
			if err := node.NS.Do(func() error { return d.Remove(b.Ifindex) }); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			checkProbes(t, []probe{{"c to b after remove", c, ap(b.V4, 8080), false, "pod1"}})
		})
	}
}
