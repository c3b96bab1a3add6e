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
	if !slices.Contains(st.Addrs, netip.MustParseAddr("169.254.1.1")) {
		t.Errorf("Addrs = %v, want the veth gateway 169.254.1.1", st.Addrs)
	}
	if slices.ContainsFunc(st.Addrs, netip.Addr.IsLinkLocalUnicast) && slices.Contains(st.Addrs, netip.MustParseAddr("fe80::1")) {
		t.Errorf("Addrs = %v: IPv6 link-local must not be a host peer", st.Addrs)
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
