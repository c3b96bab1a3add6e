/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Packet parsing for the tc programs on a pod's host-side veth (Ethernet). */
#pragma once

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "maps.h"

#define XG_PROTO_ICMP 1
#define XG_PROTO_TCP 6
#define XG_PROTO_UDP 17
#define XG_PROTO_ICMPV6 58
#define XG_PROTO_SCTP 132

#define XG_TCP_FIN 0x01
#define XG_TCP_SYN 0x02
#define XG_TCP_RST 0x04
#define XG_TCP_ACK 0x10

struct pkt {
	__u8 family; /* XG_FAMILY_*, 0 when not IP */
	__u8 proto;
	__u8 has_ports; /* sport/dport are L4 ports a policy can match */
	__u8 tcp_flags;
	__u16 sport; /* host byte order; the ICMP echo id for echo messages */
	__u16 dport;
	__u8 icmp_type;
	__u8 _pad[3];
	__u32 l4_off; /* offset of the L4 header, 0 for non-first fragments */
	__u8 saddr[16] __attribute__((aligned(8)));
	__u8 daddr[16];
};

struct ipv4_hdr {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__be16 check;
	__u8 saddr[4];
	__u8 daddr[4];
};

struct ipv6_hdr {
	__be32 ver_tc_flow;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

/* Enough of an L4 header for ports, TCP flags and ICMP type and echo id. */
struct l4_hdr {
	__be16 sport; /* ICMP: type, code */
	__be16 dport; /* ICMP: checksum */
	__be16 icmp_id;
	__u8 _unused[7];
	__u8 tcp_flags; /* byte 13 of a TCP header */
};

/* Offsets up to this are read straight from the packet when its linear
 * part holds them; the bound lets the verifier check the access. */
#define XG_MAX_DIRECT_OFF 512

/* load copies len bytes (a constant) at off into to, straight from the
 * packet's linear part when they are all there: that spares the helper
 * call, which costs more than the copy. Otherwise (paged data, or a packet
 * that ends sooner) bpf_skb_load_bytes copies the first need of them. */
static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, __u32 len, __u32 need)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	if (off <= XG_MAX_DIRECT_OFF && data + off + len <= data_end) {
		__builtin_memcpy(to, data + off, len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, need);
}

/* parse_l4 reads ports (or the ICMP echo id) at off. */
static __always_inline int parse_l4(struct __sk_buff *skb, __u32 off, struct pkt *p)
{
	struct l4_hdr l4 = {};
	__u32 need;

	switch (p->proto) {
	case XG_PROTO_TCP:
		need = 14;
		break;
	case XG_PROTO_UDP:
	case XG_PROTO_SCTP:
		need = 4;
		break;
	case XG_PROTO_ICMP:
	case XG_PROTO_ICMPV6:
		need = 6;
		break;
	default:
		return 0;
	}
	if (load(skb, off, &l4, sizeof(l4), need))
		return -1;
	p->l4_off = off;
	if (p->proto == XG_PROTO_ICMP || p->proto == XG_PROTO_ICMPV6) {
		p->icmp_type = ((__u8 *)&l4.sport)[0];
		/* Echo request and reply carry an id that pairs them, like ports. */
		if (p->icmp_type == 8 || p->icmp_type == 0 || p->icmp_type == 128 || p->icmp_type == 129)
			p->sport = p->dport = bpf_ntohs(l4.icmp_id);
		return 0;
	}
	p->sport = bpf_ntohs(l4.sport);
	p->dport = bpf_ntohs(l4.dport);
	p->has_ports = 1;
	if (p->proto == XG_PROTO_TCP)
		p->tcp_flags = l4.tcp_flags;
	return 0;
}

static __always_inline int parse_ipv4(struct __sk_buff *skb, struct pkt *p)
{
	struct ipv4_hdr ip;
	__u32 ihl;

	if (load(skb, ETH_HLEN, &ip, sizeof(ip), sizeof(ip)))
		return -1;
	ihl = (ip.ver_ihl & 0x0f) * 4;
	if ((ip.ver_ihl >> 4) != 4 || ihl < sizeof(ip))
		return -1;
	p->family = XG_FAMILY_V4;
	p->proto = ip.protocol;
	__builtin_memcpy(p->saddr, ip.saddr, 4);
	__builtin_memcpy(p->daddr, ip.daddr, 4);
	/* A non-first fragment has no L4 header: it can only match an entry
	 * that allows every port. */
	if (bpf_ntohs(ip.frag_off) & 0x1fff)
		return 0;
	return parse_l4(skb, ETH_HLEN + ihl, p);
}

#define XG_IPV6_MAX_EXT 6

static __always_inline int parse_ipv6(struct __sk_buff *skb, struct pkt *p)
{
	struct ipv6_hdr ip;
	__u32 off = ETH_HLEN + sizeof(ip);
	__u8 next;

	if (load(skb, ETH_HLEN, &ip, sizeof(ip), sizeof(ip)))
		return -1;
	if ((bpf_ntohl(ip.ver_tc_flow) >> 28) != 6)
		return -1;
	p->family = XG_FAMILY_V6;
	__builtin_memcpy(p->saddr, ip.saddr, 16);
	__builtin_memcpy(p->daddr, ip.daddr, 16);
	next = ip.nexthdr;

	for (int i = 0; i < XG_IPV6_MAX_EXT; i++) {
		__u8 ext[4];

		switch (next) {
		case 0:  /* hop-by-hop */
		case 43: /* routing */
		case 60: /* destination options */
			if (bpf_skb_load_bytes(skb, off, ext, 2))
				return -1;
			next = ext[0];
			off += (ext[1] + 1) * 8;
			break;
		case 51: /* authentication header */
			if (bpf_skb_load_bytes(skb, off, ext, 2))
				return -1;
			next = ext[0];
			off += (ext[1] + 2) * 4;
			break;
		case 44: /* fragment */
			if (bpf_skb_load_bytes(skb, off, ext, 4))
				return -1;
			next = ext[0];
			off += 8;
			if ((((__u16)ext[2] << 8) | ext[3]) & 0xfff8) {
				p->proto = next; /* non-first fragment: no ports */
				return 0;
			}
			break;
		default:
			p->proto = next;
			return parse_l4(skb, off, p);
		}
	}
	return -1; /* too many extension headers to judge: malformed for us */
}

/* parse fills p; p->family stays 0 for non-IP frames. A negative return
 * means an IP packet too short or inconsistent to judge. */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	switch (skb->protocol) {
	case bpf_htons(ETH_P_IP):
		return parse_ipv4(skb, p);
	case bpf_htons(ETH_P_IPV6):
		return parse_ipv6(skb, p);
	}
	return 0;
}

/* icmp_error reports whether the packet is an ICMP error, which quotes the
 * packet that caused it. */
static __always_inline int icmp_error(const struct pkt *p)
{
	if (!p->l4_off)
		return 0;
	if (p->proto == XG_PROTO_ICMP)
		return p->icmp_type == 3 || p->icmp_type == 11 || p->icmp_type == 12;
	if (p->proto == XG_PROTO_ICMPV6)
		return p->icmp_type >= 1 && p->icmp_type <= 4;
	return 0;
}

/* parse_quoted fills q with the packet an ICMP error quotes, which follows
 * the 8-byte ICMP header. Only its addresses, protocol and ports matter. */
static __always_inline int parse_quoted(struct __sk_buff *skb, const struct pkt *p, struct pkt *q)
{
	__u32 off = p->l4_off + 8;
	__be16 ports[2];

	q->family = p->family;
	if (p->family == XG_FAMILY_V4) {
		struct ipv4_hdr ip;
		if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) || (ip.ver_ihl >> 4) != 4)
			return -1;
		q->proto = ip.protocol;
		__builtin_memcpy(q->saddr, ip.saddr, 4);
		__builtin_memcpy(q->daddr, ip.daddr, 4);
		off += (ip.ver_ihl & 0x0f) * 4;
	} else {
		struct ipv6_hdr ip;
		if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) || (bpf_ntohl(ip.ver_tc_flow) >> 28) != 6)
			return -1;
		q->proto = ip.nexthdr; /* quoted extension headers: no match */
		__builtin_memcpy(q->saddr, ip.saddr, 16);
		__builtin_memcpy(q->daddr, ip.daddr, 16);
		off += sizeof(ip);
	}
	if (q->proto != XG_PROTO_TCP && q->proto != XG_PROTO_UDP && q->proto != XG_PROTO_SCTP)
		return -1;
	if (bpf_skb_load_bytes(skb, off, ports, sizeof(ports)))
		return -1;
	q->sport = bpf_ntohs(ports[0]);
	q->dport = bpf_ntohs(ports[1]);
	return 0;
}
