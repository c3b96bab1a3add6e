/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Xila Guard NetworkPolicy dataplane.
 *
 * xg_from_pod (tc ingress of the pod's host-side veth) enforces the pod's
 * egress policy; xg_to_pod (tc egress of the same veth) its ingress policy.
 * Both see addresses after kube-proxy's DNAT except one case: a pod's own
 * packet to a Service address, which the host rewrites only after tc
 * ingress. xg_from_pod defers such packets, and xg_post_nat — a netfilter
 * program in FORWARD and LOCAL_IN, after DNAT — judges them against the
 * endpoint they actually reach. docs/dataplane.md explains the choice. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "maps.h"
#include "parse.h"
#include "policy.h"
#include "netfilter.h"

char _license[] SEC("license") = "Dual BSD/GPL";

/* Returned to let the packet continue: the next tcx program or tc filter
 * still runs, so the dataplane composes with other programs on the device. */
#define XG_PASS TC_ACT_UNSPEC
#define XG_DROP TC_ACT_SHOT

/* source_owned: does the pod own the packet's source address? IPv6
 * link-local and unspecified sources are the link's own business (neighbour
 * discovery) and always allowed. */
static __always_inline int source_owned(__u32 ifindex, const struct endpoint *ep, const struct pkt *p)
{
	if (p->family == XG_FAMILY_V4 && (ep->flags & XG_EP_ADDR4)) {
		__u32 have, own;
		__builtin_memcpy(&have, p->saddr, 4);
		__builtin_memcpy(&own, ep->addr4, 4);
		return have == own;
	}
	if (p->family == XG_FAMILY_V6 &&
	    ((p->saddr[0] == 0xfe && (p->saddr[1] & 0xc0) == 0x80) ||
	     (((__u64 *)p->saddr)[0] == 0 && ((__u64 *)p->saddr)[1] == 0)))
		return 1;
	struct endpoint_addr_key k = {.ifindex = ifindex, .family = p->family};
	__builtin_memcpy(k.addr, p->saddr, 16);
	return bpf_map_lookup_elem(&xg_ep_addrs, &k) != NULL;
}

/* link_control: ICMPv6 neighbour discovery and multicast listener messages
 * keep the link working and are not traffic a NetworkPolicy governs. */
static __always_inline int link_control(const struct pkt *p)
{
	if (p->proto != XG_PROTO_ICMPV6)
		return 0;
	switch (p->icmp_type) {
	case 130 ... 137:
	case 143:
		return 1;
	}
	return 0;
}

/* related: is this ICMP error about a flow the pod has? The quoted packet
 * went the other way: for an error on its way into the pod, the pod sent
 * it. Such errors (packet too big, port unreachable) belong to the flow and
 * keep path MTU discovery working for isolated pods. */
static __always_inline int related(struct __sk_buff *skb, const struct pkt *p, __u32 ifindex, __u8 dir)
{
	struct pkt q = {};
	struct flow_key k;

	if (parse_quoted(skb, p, &q) < 0)
		return 0;
	flow_key_of(&k, ifindex, &q, dir == XG_DIR_EGRESS ? XG_DIR_INGRESS : XG_DIR_EGRESS);
	struct flow_value *f = bpf_map_lookup_elem(&xg_flows, &k);
	if (!f || f->expires <= bpf_ktime_get_coarse_ns())
		return 0;
	count(XG_STAT_RELATED);
	return 1;
}

static __always_inline int enforce(struct __sk_buff *skb, __u8 dir)
{
	__u32 ifindex = skb->ifindex;
	struct endpoint *epp = bpf_map_lookup_elem(&xg_endpoints, &ifindex);
	if (!epp)
		return XG_PASS;
	struct endpoint ep = *epp; /* one consistent generation */
	int isolated = ep.ingress_policy != XG_POLICY_NONE || ep.egress_policy != XG_POLICY_NONE;
	__u32 policy = dir == XG_DIR_EGRESS ? ep.egress_policy : ep.ingress_policy;

	struct pkt p = {};
	if (parse(skb, &p) < 0) {
		count(XG_STAT_MALFORMED);
		return isolated ? XG_DROP : XG_PASS;
	}
	if (!p.family)
		return XG_PASS; /* ARP and other non-IP frames */
	if (link_control(&p))
		return XG_PASS;

	struct flow_key k;
	flow_key_of(&k, ifindex, &p, dir);
	/* The coarse clock costs a memory read, not a clock read, and a tick of
	 * resolution is plenty for timeouts of seconds. */
	__u64 now = bpf_ktime_get_coarse_ns();
	/* A bare SYN opens a connection: it is never a reply, and a flow this
	 * policy allowed would only let it pass where the policy lets it pass
	 * anyway. So it skips the flow lookup and goes to the policy, which
	 * tracks it afresh. */
	int bare_syn = p.proto == XG_PROTO_TCP && (p.tcp_flags & (XG_TCP_SYN | XG_TCP_ACK)) == XG_TCP_SYN;
	struct flow_value *f = bare_syn ? NULL : bpf_map_lookup_elem(&xg_flows, &k);
	/* A live flow was opened from an address the pod owns; only packets
	 * outside one need the anti-spoofing lookup. */
	if (!(f && f->expires > now) && dir == XG_DIR_EGRESS && (ep.flags & XG_EP_ANTISPOOF) &&
	    !source_owned(ifindex, &ep, &p)) {
		count(XG_STAT_SPOOFED);
		return XG_DROP;
	}
	if (icmp_error(&p) && related(skb, &p, ifindex, dir))
		return XG_PASS;
	if (f && f->expires > now) {
		if (f->origin == dir) {
			/* A later packet of a flow this very policy allowed. */
			if (f->policy == policy) {
				touch(f, p.proto, p.tcp_flags, now);
				count(XG_STAT_ALLOWED);
				return XG_PASS;
			}
		} else {
			/* A reply (never a bare SYN, which found no flow). If the
			 * pod's policy changed since the flow was allowed, the flow
			 * must still be allowed by the current one: a stale entry
			 * never outlives its permission. */
			__u32 op = f->origin == XG_DIR_EGRESS ? ep.egress_policy : ep.ingress_policy;
			if (f->policy == op ||
			    policy_allows(op, p.family, f->policy_addr, p.proto, f->policy_port, p.has_ports)) {
				f->policy = op;
				touch(f, p.proto, p.tcp_flags, now);
				count(XG_STAT_REPLY);
				return XG_PASS;
			}
		}
	}

	if (dir == XG_DIR_EGRESS && policy != XG_POLICY_NONE && is_frontend(p.family, p.daddr)) {
		/* The destination is known only after DNAT: xg_post_nat decides. */
		count(XG_STAT_DEFERRED);
		return XG_PASS;
	}
	const __u8 *peer = dir == XG_DIR_EGRESS ? p.daddr : p.saddr;
	if (!policy_allows(policy, p.family, peer, p.proto, p.dport, p.has_ports)) {
		count(XG_STAT_DENIED);
		return XG_DROP;
	}
	/* Track even when not isolated, so replies survive a later isolation. */
	track(&k, dir, policy, peer, p.dport, p.proto, p.tcp_flags, now);
	count(XG_STAT_ALLOWED);
	return XG_PASS;
}

SEC("tc")
int xg_from_pod(struct __sk_buff *skb)
{
	return enforce(skb, XG_DIR_EGRESS);
}

SEC("tc")
int xg_to_pod(struct __sk_buff *skb)
{
	return enforce(skb, XG_DIR_INGRESS);
}

static __always_inline int addr_eq(const __u8 *a, const __u8 *b)
{
	__u64 a0, a1, b0, b1;

	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	__builtin_memcpy(&b0, b, 8);
	__builtin_memcpy(&b1, b + 8, 8);
	return a0 == b0 && a1 == b1;
}

/* nat_view is a connection as the pod opened it and where DNAT sent it. */
struct nat_view {
	struct pkt orig;    /* as the pod sent it: daddr/dport may be a Service */
	__u8 target[16];    /* where it goes after DNAT */
	__u16 target_port;
};

static __always_inline int read_addr(__u8 *dst, union nf_inet_addr *src)
{
	return bpf_probe_read_kernel(dst, 16, src);
}

/* view_from_ct reads both directions of the connection. The reply tuple's
 * source is the endpoint DNAT chose. */
static __always_inline int view_from_ct(struct nf_conn *ct, struct nat_view *v)
{
	__be16 port;

	if (read_addr(v->orig.saddr, &ct->tuplehash[0].tuple.src.u3) ||
	    read_addr(v->orig.daddr, &ct->tuplehash[0].tuple.dst.u3) ||
	    read_addr(v->target, &ct->tuplehash[1].tuple.src.u3) ||
	    bpf_probe_read_kernel(&v->orig.proto, 1, &ct->tuplehash[0].tuple.dst.protonum))
		return -1;
	if (bpf_probe_read_kernel(&port, 2, &ct->tuplehash[0].tuple.src.u.all))
		return -1;
	v->orig.sport = bpf_ntohs(port);
	if (bpf_probe_read_kernel(&port, 2, &ct->tuplehash[0].tuple.dst.u.all))
		return -1;
	v->orig.dport = bpf_ntohs(port);
	if (bpf_probe_read_kernel(&port, 2, &ct->tuplehash[1].tuple.src.u.all))
		return -1;
	v->target_port = bpf_ntohs(port);
	return 0;
}

/* view_from_packet serves untracked packets, which no DNAT touched. In
 * FORWARD and LOCAL_IN the IP header is linear at skb->data. */
static __always_inline int view_from_packet(struct sk_buff *skb, struct nat_view *v)
{
	unsigned char *data = skb->data;
	__u32 headlen = skb->len - skb->data_len;
	__u32 l4 = 0;
	__be16 ports[2];

	if (v->orig.family == XG_FAMILY_V4) {
		struct ipv4_hdr ip;
		if (headlen < sizeof(ip) || bpf_probe_read_kernel(&ip, sizeof(ip), data))
			return -1;
		v->orig.proto = ip.protocol;
		__builtin_memcpy(v->orig.saddr, ip.saddr, 4);
		__builtin_memcpy(v->orig.daddr, ip.daddr, 4);
		if (!(bpf_ntohs(ip.frag_off) & 0x1fff))
			l4 = (ip.ver_ihl & 0x0f) * 4;
	} else {
		struct ipv6_hdr ip;
		if (headlen < sizeof(ip) || bpf_probe_read_kernel(&ip, sizeof(ip), data))
			return -1;
		v->orig.proto = ip.nexthdr; /* extension headers: judged without ports */
		__builtin_memcpy(v->orig.saddr, ip.saddr, 16);
		__builtin_memcpy(v->orig.daddr, ip.daddr, 16);
		l4 = sizeof(ip);
	}
	if (l4 && l4 + 4 <= headlen && !bpf_probe_read_kernel(ports, 4, data + l4)) {
		v->orig.sport = bpf_ntohs(ports[0]);
		v->orig.dport = bpf_ntohs(ports[1]);
	}
	__builtin_memcpy(v->target, v->orig.daddr, 16);
	v->target_port = v->orig.dport;
	return 0;
}

SEC("netfilter")
int xg_post_nat(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;
	struct sk_buff *skb = ctx->skb;
	struct net_device *in = state->in;
	if (!in)
		return XG_NF_ACCEPT;
	__u32 ifindex = in->ifindex;
	struct endpoint *epp = bpf_map_lookup_elem(&xg_endpoints, &ifindex);
	if (!epp)
		return XG_NF_ACCEPT;
	__u32 policy = epp->egress_policy;
	if (policy == XG_POLICY_NONE)
		return XG_NF_ACCEPT;

	struct nat_view v = {};
	v.orig.family = state->pf == XG_NFPROTO_IPV6 ? XG_FAMILY_V6 : XG_FAMILY_V4;
	unsigned long nfct = skb->_nfct;
	struct nf_conn *ct = (struct nf_conn *)(nfct & XG_NFCT_PTRMASK);
	if (ct) {
		/* Only the pod's own direction; replies were judged at tc. */
		__u32 ctinfo = nfct & 7;
		if (ctinfo != XG_IP_CT_NEW && ctinfo != XG_IP_CT_ESTABLISHED)
			return XG_NF_ACCEPT;
		if (view_from_ct(ct, &v) < 0)
			goto drop;
	} else if (view_from_packet(skb, &v) < 0) {
		goto drop;
	}
	/* Anything not sent to a Service address was judged at tc already. */
	if (!is_frontend(v.orig.family, v.orig.daddr))
		return XG_NF_ACCEPT;
	v.orig.has_ports = v.orig.proto == XG_PROTO_TCP || v.orig.proto == XG_PROTO_UDP ||
			   v.orig.proto == XG_PROTO_SCTP;

	struct flow_key k;
	flow_key_of(&k, ifindex, &v.orig, XG_DIR_EGRESS);
	/* Netfilter programs may not read the coarse clock the tc programs
	 * use. Both are CLOCK_MONOTONIC; the coarse one lags by at most a
	 * tick, nothing next to timeouts of seconds. */
	__u64 now = bpf_ktime_get_ns();
	struct flow_value *f = bpf_map_lookup_elem(&xg_flows, &k);
	if (f && f->expires > now && f->origin == XG_DIR_EGRESS && f->policy == policy &&
	    f->policy_port == v.target_port && addr_eq(f->policy_addr, v.target)) {
		touch(f, v.orig.proto, 0, now);
		return XG_NF_ACCEPT;
	}
	if (!policy_allows(policy, v.orig.family, v.target, v.orig.proto, v.target_port, v.orig.has_ports))
		goto drop;
	/* Keyed by the Service address the pod sees, so the de-NATed replies
	 * find it at xg_to_pod; checked against the endpoint, so a later
	 * policy change revalidates the real destination. */
	track(&k, XG_DIR_EGRESS, policy, v.target, v.target_port, v.orig.proto, 0, now);
	count(XG_STAT_POST_NAT_ALLOWED);
	return XG_NF_ACCEPT;
drop:
	count(XG_STAT_POST_NAT_DENIED);
	return XG_NF_DROP;
}
