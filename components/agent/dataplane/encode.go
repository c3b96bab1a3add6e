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

	portsetAny    = 0xffffffff
	maxPortRanges = 32

	flagAntiSpoof = 1
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

// peerLPMKey: the trie matches the 64 bits of policy and family, then the
// prefix.
func peerLPMKey(policy uint32, p netip.Prefix) bpfobj.XgPeerLpmKey {
	return bpfobj.XgPeerLpmKey{Prefixlen: 64 + uint32(p.Bits()), Policy: policy, Family: family(p.Addr()), Addr: addr16(p.Masked().Addr())}
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
