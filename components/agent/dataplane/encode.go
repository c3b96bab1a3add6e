//go:build linux

package dataplane

import (
	"net/netip"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
)

// Values shared with bpf/maps.h.
const (
	familyV4 = 4
	familyV6 = 6

	policyNone    = 0 // not isolated
	policyDenyAll = 1 // isolated, nothing allowed; has no entries
	firstPolicyID = 2

	prefixSlots = 8192 // XG_PREFIX_SLOTS

	portsetAny    = 0xffffffff
	maxPortRanges = 32

	flagAntiSpoof = 1
	flagAddr4     = 2 // XG_EP_ADDR4: Addr4 holds the pod's only IPv4 address
)

func family(a netip.Addr) uint32 {
	if a.Unmap().Is4() {
		return familyV4
	}
	return familyV6
}

// addr16 lays an address out as the programs do: IPv4 in the first four
// bytes, the rest zero.
func addr16(a netip.Addr) [16]byte {
	var out [16]byte
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		copy(out[:], b[:])
		return out
	}
	return a.As16()
}

func peerKey(policy uint32, a netip.Addr) bpfobj.XgPeerKey {
	return bpfobj.XgPeerKey{Policy: policy, Family: family(a), Addr: addr16(a)}
}

// peerCIDRKey: the prefix's masked address under its length.
func peerCIDRKey(policy uint32, p netip.Prefix) bpfobj.XgPeerCidrKey {
	return bpfobj.XgPeerCidrKey{Policy: policy, Family: uint16(family(p.Addr())), Prefixlen: uint16(p.Bits()), Addr: addr16(p.Masked().Addr())}
}

// prefixLens returns, per family, the lengths the keys use, longest first,
// as the programs walk them.
func prefixLens(policy uint32, keys []bpfobj.XgPeerCidrKey) ([]bpfobj.XgPrefixLensKey, []bpfobj.XgPrefixLens) {
	used := map[uint32]map[uint16]bool{}
	for _, k := range keys {
		f := uint32(k.Family)
		if used[f] == nil {
			used[f] = map[uint16]bool{}
		}
		used[f][k.Prefixlen] = true
	}
	var lk []bpfobj.XgPrefixLensKey
	var lv []bpfobj.XgPrefixLens
	for _, f := range []uint32{familyV4, familyV6} {
		if len(used[f]) == 0 {
			continue
		}
		var v bpfobj.XgPrefixLens
		for bits := len(v.Lens) - 1; bits >= 0; bits-- {
			if used[f][uint16(bits)] {
				v.Lens[v.Count] = uint8(bits)
				v.Count++
			}
		}
		lk = append(lk, bpfobj.XgPrefixLensKey{Policy: policy, Family: f})
		lv = append(lv, v)
	}
	return lk, lv
}

func frontendKey(p netip.Prefix) bpfobj.XgFrontendKey {
	return bpfobj.XgFrontendKey{Prefixlen: 32 + uint32(p.Bits()), Family: family(p.Addr()), Addr: addr16(p.Masked().Addr())}
}

func frontendPrefix(k bpfobj.XgFrontendKey) netip.Prefix {
	bits := int(k.Prefixlen) - 32
	if k.Family == familyV4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(k.Addr[:4])), bits)
	}
	return netip.PrefixFrom(netip.AddrFrom16(k.Addr), bits)
}

func addrKey(ifindex int, a netip.Addr) bpfobj.XgEndpointAddrKey {
	return bpfobj.XgEndpointAddrKey{Ifindex: uint32(ifindex), Family: family(a), Addr: addr16(a)}
}

func keyAddr(k bpfobj.XgEndpointAddrKey) netip.Addr {
	if k.Family == familyV4 {
		return netip.AddrFrom4([4]byte(k.Addr[:4]))
	}
	return netip.AddrFrom16(k.Addr)
}
