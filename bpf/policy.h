/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Policy lookups and flow tracking, shared by the tc and netfilter programs. */
#pragma once

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "maps.h"
#include "parse.h"

#define XG_SEC 1000000000ULL
#define XG_TIMEOUT_TCP (3600 * XG_SEC)
#define XG_TIMEOUT_OTHER (120 * XG_SEC)
#define XG_TIMEOUT_CLOSING (10 * XG_SEC)

/* prefix_mask: the first n bits of a 64-bit half of an address, in the
 * address's byte order. */
static __always_inline __u64 prefix_mask(__u32 n)
{
	if (n == 0)
		return 0;
	if (n >= 64)
		return ~0ULL;
	return bpf_cpu_to_be64(~0ULL << (64 - n));
}

/* cidr_portset: the port set of the policy's longest prefix holding the
 * address (a0, a1: its two halves as stored), or -1. One hash probe per
 * prefix length the policy uses in the family, longest first; policies
 * rarely use more than a few lengths. The lengths come from the policy's
 * array slot, or from the hash when another policy holds the slot. A global
 * function, so the verifier checks its loop once rather than at every call
 * site. */
__attribute__((noinline)) __s64 cidr_portset(__u32 policy, __u32 family, __u64 a0, __u64 a1)
{
	const __u8 *lens;
	__u32 n;
	__u32 slot = policy & (XG_PREFIX_SLOTS - 1);
	struct prefix_slot *s = bpf_map_lookup_elem(&xg_prefix_slots, &slot);
	if (s && s->policy == policy) {
		__u32 fi = family == XG_FAMILY_V6;
		n = s->count[fi];
		lens = s->lens[fi];
	} else {
		struct prefix_lens_key lk = {.policy = policy, .family = family};
		struct prefix_lens *pl = bpf_map_lookup_elem(&xg_prefix_lens, &lk);
		if (!pl)
			return -1;
		n = pl->count;
		lens = pl->lens;
	}
	struct peer_cidr_key k = {.policy = policy, .family = family};
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < XG_MAX_PREFIX_LENS; i++) {
		if (i >= n)
			break;
		__u32 len = lens[i];
		__u64 m0 = a0 & prefix_mask(len);
		__u64 m1 = a1 & prefix_mask(len > 64 ? len - 64 : 0);
		k.prefixlen = len;
		__builtin_memcpy(k.addr, &m0, 8);
		__builtin_memcpy(k.addr + 8, &m1, 8);
		struct peer_value *v = bpf_map_lookup_elem(&xg_peers_cidr, &k);
		if (v)
			return v->portset;
	}
	return -1;
}

/* policy_allows: may a peer at addr use proto/port under the policy? The
 * exact-address hash answers pod peers in one lookup; the per-length CIDR
 * hashes answer prefixes. Both hold flattened entries, so the first hit
 * decides. */
static __always_inline int policy_allows(__u32 policy, __u8 family, const __u8 *addr, __u8 proto,
					 __u16 port, int has_ports)
{
	struct peer_value *v;
	__u32 portset;

	if (policy == XG_POLICY_NONE)
		return 1;

	struct peer_key k = {.policy = policy, .family = family};
	__builtin_memcpy(k.addr, addr, 16);
	v = bpf_map_lookup_elem(&xg_peers, &k);
	if (v) {
		portset = v->portset;
	} else {
		__u64 a0, a1;
		__builtin_memcpy(&a0, addr, 8);
		__builtin_memcpy(&a1, addr + 8, 8);
		__s64 ps = cidr_portset(policy, family, a0, a1);
		if (ps < 0)
			return 0;
		portset = ps;
	}
	if (portset == XG_PORTSET_ANY)
		return 1;
	if (!has_ports)
		return 0;

	struct portset_key pk = {.policy = policy, .index = portset};
	struct portset *ps = bpf_map_lookup_elem(&xg_portsets, &pk);
	if (!ps)
		return 0;
	__u32 n = ps->count;
	for (__u32 i = 0; i < XG_MAX_PORT_RANGES; i++) {
		if (i >= n)
			break;
		struct port_range *r = &ps->ranges[i];
		if (r->proto == proto && r->first <= port && port <= r->last)
			return 1;
	}
	return 0;
}

/* is_frontend: is addr a Service address that kube-proxy will rewrite? */
static __always_inline int is_frontend(__u8 family, const __u8 *addr)
{
	struct frontend_key k = {.prefixlen = 32 + 128, .family = family};
	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&xg_frontends, &k) != NULL;
}

static __always_inline __u64 flow_timeout(__u8 proto, __u8 closing)
{
	if (closing)
		return XG_TIMEOUT_CLOSING;
	return proto == XG_PROTO_TCP ? XG_TIMEOUT_TCP : XG_TIMEOUT_OTHER;
}

/* touch keeps a flow alive. It writes the deadline at most once a second
 * while the flow is open, so busy flows do not bounce the cache line. */
static __always_inline void touch(struct flow_value *f, __u8 proto, __u8 tcp_flags, __u64 now)
{
	if (proto == XG_PROTO_TCP) {
		if ((tcp_flags & (XG_TCP_SYN | XG_TCP_ACK)) == XG_TCP_SYN)
			f->closing = 0; /* the tuple opens again */
		if (tcp_flags & (XG_TCP_FIN | XG_TCP_RST))
			f->closing = 1;
	}
	__u64 deadline = now + flow_timeout(proto, f->closing);
	if (f->closing || deadline - f->expires > XG_SEC)
		f->expires = deadline;
}

static __always_inline void track(struct flow_key *k, __u8 origin, __u32 policy, const __u8 *policy_addr,
				  __u16 policy_port, __u8 proto, __u8 tcp_flags, __u64 now)
{
	struct flow_value v = {
		.policy = policy,
		.origin = origin,
		.closing = proto == XG_PROTO_TCP && (tcp_flags & (XG_TCP_FIN | XG_TCP_RST)),
		.policy_port = policy_port,
	};
	__builtin_memcpy(v.policy_addr, policy_addr, 16);
	v.expires = now + flow_timeout(proto, v.closing);
	bpf_map_update_elem(&xg_flows, k, &v, BPF_ANY);
}

/* flow_key_of names the flow from the pod's side. */
static __always_inline void flow_key_of(struct flow_key *k, __u32 ifindex, const struct pkt *p, __u8 dir)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	k->family = p->family;
	k->proto = p->proto;
	if (dir == XG_DIR_EGRESS) {
		k->pod_port = p->sport;
		k->peer_port = p->dport;
		__builtin_memcpy(k->pod_addr, p->saddr, 16);
		__builtin_memcpy(k->peer_addr, p->daddr, 16);
	} else {
		k->pod_port = p->dport;
		k->peer_port = p->sport;
		__builtin_memcpy(k->pod_addr, p->daddr, 16);
		__builtin_memcpy(k->peer_addr, p->saddr, 16);
	}
}
