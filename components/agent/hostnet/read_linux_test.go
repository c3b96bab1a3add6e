//go:build linux

package hostnet

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
)

// TestReadPTPNode reads a node namespace wired like the ptp CNI plugin.
func TestReadPTPNode(t *testing.T) {
	node := netns.NewNode(t, 2)
	var st State
	if err := node.NS.Do(func() (err error) { st, err = Read(); return err }); err != nil {
		t.Fatal(err)
	}
	for _, p := range node.Pods {
		if got := st.Interface(p.Addrs()); got != p.Ifindex {
			t.Errorf("pod %s: Interface = %d, want %d (%s)", p.Name, got, p.Ifindex, p.HostIf)
		}
	}
	for _, p := range node.Pods {
		if !st.PodInterfaces[p.Ifindex] {
			t.Errorf("pod %s: interface %d (%s) is not a pod interface", p.Name, p.Ifindex, p.HostIf)
		}
		if got := st.RoutedThrough(p.Ifindex); !slices.Equal(got, []netip.Addr{p.V4, p.V6}) {
			t.Errorf("pod %s: RoutedThrough = %v, want %v", p.Name, got, p.Addrs())
		}
	}
	if !slices.Contains(st.Addrs, netip.MustParseAddr("169.254.1.1")) {
		t.Errorf("Addrs = %v, want the veth gateway 169.254.1.1", st.Addrs)
	}
	if slices.ContainsFunc(st.Addrs, netip.Addr.IsLinkLocalUnicast) && slices.Contains(st.Addrs, netip.MustParseAddr("fe80::1")) {
		t.Errorf("Addrs = %v: IPv6 link-local must not be a host peer", st.Addrs)
	}
}

// TestPodInterfacesLeaveOtherLinksOut checks that only pod veths count as
// pod interfaces: not a veth that routes through a gateway (an uplink, like
// a kind node's own eth0) or carries a default route, not a veth whose peer
// is in the same namespace, and not a veth enslaved to a bridge.
func TestPodInterfacesLeaveOtherLinksOut(t *testing.T) {
	node := netns.NewNode(t, 1)
	for _, args := range [][]string{
		// an uplink: a veth to elsewhere with the default route through it
		{"ip", "link", "add", "up0", "type", "veth", "peer", "name", "up0p", "netns", node.Pods[0].NS.Name},
		{"ip", "addr", "add", "192.0.2.2/24", "dev", "up0"},
		{"ip", "link", "set", "up0", "up"},
		{"ip", "route", "add", "192.0.2.9/32", "dev", "up0"},
		{"ip", "route", "add", "default", "via", "192.0.2.1", "dev", "up0"},
		// a tunnel-like veth with a default route and no gateway
		{"ip", "link", "add", "dflt0", "type", "veth", "peer", "name", "dflt0p", "netns", node.Pods[0].NS.Name},
		{"ip", "link", "set", "dflt0", "up"},
		{"ip", "route", "add", "192.0.2.12/32", "dev", "dflt0"},
		{"ip", "route", "add", "default", "dev", "dflt0", "metric", "500"},
		// both ends on the node
		{"ip", "link", "add", "loc0", "type", "veth", "peer", "name", "loc1"},
		{"ip", "link", "set", "loc0", "up"},
		{"ip", "route", "add", "192.0.2.10/32", "dev", "loc0"},
		// a bridge port
		{"ip", "link", "add", "br0", "type", "bridge"},
		{"ip", "link", "add", "brp0", "type", "veth", "peer", "name", "brp0p", "netns", node.Pods[0].NS.Name},
		{"ip", "link", "set", "brp0", "master", "br0"},
		{"ip", "link", "set", "brp0", "up"},
		{"ip", "route", "add", "192.0.2.11/32", "dev", "brp0"},
	} {
		node.NS.MustRun(t, args...)
	}
	var st State
	if err := node.NS.Do(func() (err error) { st, err = Read(); return err }); err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{node.Pods[0].Ifindex: true}
	if len(st.PodInterfaces) != 1 || !st.PodInterfaces[node.Pods[0].Ifindex] {
		t.Errorf("PodInterfaces = %v, want only the pod's veth %v", st.PodInterfaces, want)
	}
}

// TestSubscribeSeesNewRoute checks that a route change is reported.
func TestSubscribeSeesNewRoute(t *testing.T) {
	node := netns.NewNode(t, 1)
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	if err := node.NS.Do(func() error { return Subscribe(changed, done) }); err != nil {
		t.Fatal(err)
	}
	// Drain what the set-up itself may have queued.
	select {
	case <-changed:
	case <-time.After(100 * time.Millisecond):
	}
	node.NS.MustRun(t, "ip", "route", "add", "10.200.0.99/32", "dev", node.Pods[0].HostIf)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification for a new host route")
	}
}
