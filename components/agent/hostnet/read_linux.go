//go:build linux

package hostnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Read reads the routes and addresses of the current network namespace.
func Read() (State, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return State{}, fmt.Errorf("listing routes: %w", err)
	}
	st := State{Routes: map[netip.Addr]int{}, PodInterfaces: map[int]bool{}}
	uplinks := map[int]bool{}
	for _, r := range routes {
		if a, ok := hostRoute(r); ok {
			st.Routes[a] = r.LinkIndex
		}
		if r.Gw != nil || len(r.MultiPath) > 0 || isDefault(r) {
			uplinks[r.LinkIndex] = true
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		return State{}, fmt.Errorf("listing links: %w", err)
	}
	routed := map[int]bool{}
	for _, ifindex := range st.Routes {
		routed[ifindex] = true
	}
	for _, l := range links {
		a := l.Attrs()
		if l.Type() == "veth" && a.NetNsID >= 0 && a.MasterIndex == 0 && routed[a.Index] && !uplinks[a.Index] {
			st.PodInterfaces[a.Index] = true
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return State{}, fmt.Errorf("listing addresses: %w", err)
	}
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !usable(ip) || seen[ip.Unmap()] {
			continue
		}
		seen[ip.Unmap()] = true
		st.Addrs = append(st.Addrs, ip.Unmap())
	}
	slices.SortFunc(st.Addrs, netip.Addr.Compare)
	return st, nil
}

// isDefault reports whether r is a default route (netlink leaves Dst empty
// for some and gives others a zero-length prefix).
func isDefault(r netlink.Route) bool {
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// hostRoute returns the destination of a route to one address straight
// through an interface.
func hostRoute(r netlink.Route) (netip.Addr, bool) {
	if r.Dst == nil || r.LinkIndex <= 0 || r.Gw != nil || len(r.MultiPath) > 0 {
		return netip.Addr{}, false
	}
	ones, bits := r.Dst.Mask.Size()
	if ones != bits {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(r.Dst.IP)
	if !ok {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Subscribe sends on changed whenever a route or a link of the current
// network namespace changes, until done is closed. Sends never block: a
// pending notification is enough.
func Subscribe(changed chan<- struct{}, done <-chan struct{}) error {
	routes := make(chan netlink.RouteUpdate, 64)
	links := make(chan netlink.LinkUpdate, 64)
	if err := netlink.RouteSubscribe(routes, done); err != nil {
		return fmt.Errorf("subscribing to route changes: %w", err)
	}
	if err := netlink.LinkSubscribe(links, done); err != nil {
		return fmt.Errorf("subscribing to link changes: %w", err)
	}
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			select {
			case <-done:
				return
			case _, ok := <-routes:
				if !ok {
					return
				}
				notify()
			case _, ok := <-links:
				if !ok {
					return
				}
				notify()
			}
		}
	}()
	return nil
}
