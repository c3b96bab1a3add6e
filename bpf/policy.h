/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Policy lookups and flow tracking, shared by the tc and netfilter programs. */
#pragma once

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "maps.h"
#include "parse.h"

#define XG_SEC 1000000000ULL
#define XG_TIMEOUT_TCP (3600 * XG_SEC)
#define XG_TIMEOUT_OTHER (120 * XG_SEC)
#define XG_TIMEOUT_CLOSING (10 * XG_SEC)

/* policy_allows: may a peer at addr use proto/port under the policy? The
 * exact-address hash answers pod peers in one lookup; the trie answers
 * CIDRs. Both hold flattened entries, so the first hit decides. */
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
	if (!v) {
		struct peer_lpm_key lk = {.prefixlen = 64 + 128, .policy = policy, .family = family};
		__builtin_memcpy(lk.addr, addr, 16);
		v = bpf_map_lookup_elem(&xg_peers_lpm, &lk);
		if (!v)
			return 0;
	}
	portset = v->portset;
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
