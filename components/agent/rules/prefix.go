package rules

import (
	"net/netip"
)

// Canonical returns p masked, with an IPv4-mapped IPv6 prefix turned into
// the IPv4 prefix it denotes, so that equal sets of addresses have one form.
func Canonical(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// Subtract returns prefixes that together cover exactly the addresses of
// cidr that lie in none of except: the real set difference, not an
// approximation. Exceptions of the other address family are ignored.
func Subtract(cidr netip.Prefix, except []netip.Prefix) []netip.Prefix {
	cidr = Canonical(cidr)
	var relevant []netip.Prefix
	for _, e := range except {
		e = Canonical(e)
		if e.Addr().Is4() == cidr.Addr().Is4() && e.Overlaps(cidr) {
			relevant = append(relevant, e)
		}
	}
	var out []netip.Prefix
	subtract(cidr, relevant, &out)
	return out
}

// subtract appends cidr minus except to out. Prefixes either nest or are
// disjoint, so an exception that overlaps cidr either covers it (nothing is
// left) or lies inside one of its halves (split and recurse).
func subtract(cidr netip.Prefix, except []netip.Prefix, out *[]netip.Prefix) {
	var inside []netip.Prefix
	for _, e := range except {
		if !e.Overlaps(cidr) {
			continue
		}
		if e.Bits() <= cidr.Bits() {
			return // e covers cidr
		}
		inside = append(inside, e)
	}
	if len(inside) == 0 {
		*out = append(*out, cidr)
		return
	}
	lo, hi := Halves(cidr)
	subtract(lo, inside, out)
	subtract(hi, inside, out)
}

// Halves splits a prefix that is not a single address into its two
// children, one bit longer.
func Halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits()
	lo := netip.PrefixFrom(p.Addr(), bits+1)
	if p.Addr().Is4() {
		b := p.Addr().As4()
		b[bits/8] |= 0x80 >> (bits % 8)
		return lo, netip.PrefixFrom(netip.AddrFrom4(b), bits+1)
	}
	b := p.Addr().As16()
	b[bits/8] |= 0x80 >> (bits % 8)
	return lo, netip.PrefixFrom(netip.AddrFrom16(b), bits+1)
}

// Contains reports whether outer covers every address of inner.
func Contains(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

// comparePrefixes orders IPv4 before IPv6, then by address, then shorter
// first, so that an ancestor always sorts right before its descendants.
func comparePrefixes(a, b netip.Prefix) int {
	if a.Addr().Is4() != b.Addr().Is4() {
		if a.Addr().Is4() {
			return -1
		}
		return 1
	}
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
