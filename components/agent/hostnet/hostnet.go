package hostnet

import (
	"net/netip"
	"slices"
)

// State is one reading of the node's network namespace.
type State struct {
	// Routes maps every address with a host route through an interface
	// (a /32 or /128 without a gateway) to that interface's index.
	Routes map[netip.Addr]int
	// Addrs are the node's own unicast addresses on every interface:
	// global ones and IPv4 link-local ones (some CNIs give the host side
	// of every pod veth 169.254.1.1, the source of the kubelet's probes).
	// Loopback and IPv6 link-local addresses are left out: the dataplane
	// exempts a pod's IPv6 link-local sources from its anti-spoofing check,
	// so they must never be trusted as the node.
	Addrs []netip.Addr
	// PodInterfaces are the interfaces that look like a pod's host-side
	// veth: a veth whose peer is in another network namespace, not a
	// bridge port, with a host route through it and no route through a
	// gateway or default route on it (so never the node's uplink).
	PodInterfaces map[int]bool
}

// HostPeers returns the node's addresses as single-address prefixes.
func (s State) HostPeers() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.Addrs))
	for _, a := range s.Addrs {
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

// Interface returns the interface the given pod addresses are routed
// through. All routed addresses must agree; an address without a host
// route is ignored (a second family not configured yet). It returns 0 when
// none is routed or they disagree, which the caller treats as "interface
// not known yet".
func (s State) Interface(addrs []netip.Addr) int {
	found := 0
	for _, a := range addrs {
		ifindex, ok := s.Routes[a.Unmap()]
		if !ok {
			continue
		}
		if found != 0 && found != ifindex {
			return 0
		}
		found = ifindex
	}
	return found
}

// RoutedThrough returns the addresses with a host route through ifindex,
// sorted.
func (s State) RoutedThrough(ifindex int) []netip.Addr {
	var out []netip.Addr
	for a, i := range s.Routes {
		if i == ifindex {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// usable reports whether a may be a host peer.
func usable(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case !a.IsValid() || a.IsLoopback() || a.IsMulticast() || a.IsUnspecified():
		return false
	case a.Is4() && a.IsLinkLocalUnicast():
		return true
	default:
		return a.IsGlobalUnicast()
	}
}
