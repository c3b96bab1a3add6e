/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Map layouts shared by the programs and, through bpf2go, by the Go side.
 *
 * A pod's policy for one direction is a "policy id". Everything the policy
 * allows is stored under that id in the shared maps, and the pod's endpoint
 * entry names the ids in force. A policy change writes the new rules under a
 * fresh id, then replaces the endpoint entry — one pointer switch — and only
 * after an RCU grace period deletes the old id's entries. A reader therefore
 * always sees one complete generation, never a mix or an empty state. */
#pragma once

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define XG_FAMILY_V4 4
#define XG_FAMILY_V6 6

/* Directions, from the pod's point of view. */
#define XG_DIR_INGRESS 1
#define XG_DIR_EGRESS 2

/* Policy id 0: the pod is not isolated in that direction. Ids are never
 * reused, so a tracked flow validated under an id cannot be mistaken for
 * one validated under another policy. */
#define XG_POLICY_NONE 0

/* Portset index meaning every protocol and port. */
#define XG_PORTSET_ANY 0xffffffff
#define XG_MAX_PORT_RANGES 32

/* Endpoint flags. */
#define XG_EP_ANTISPOOF 1 /* drop packets from the pod with a source it does not own */
#define XG_EP_ADDR4 2     /* addr4 is the pod's only IPv4 address */

/* Keyed by the ifindex of the pod's host-side interface. A pod with one
 * IPv4 address carries it here, so that anti-spoofing checks its IPv4
 * packets without a lookup in xg_ep_addrs. */
struct endpoint {
	__u32 ingress_policy;
	__u32 egress_policy;
	__u32 flags;
	__u8 addr4[4];
};

/* The pod's own addresses, for anti-spoofing. */
struct endpoint_addr_key {
	__u32 ifindex;
	__u32 family;
	__u8 addr[16]; /* IPv4 in the first 4 bytes, the rest zero */
};

/* Exact peer addresses (pod IPs, /32 and /128 entries). */
struct peer_key {
	__u32 policy;
	__u32 family;
	__u8 addr[16];
};

/* Peer prefixes (CIDRs), one hash probe per prefix length: the address
 * masked to prefixlen bits. */
struct peer_cidr_key {
	__u32 policy;
	__u16 family;
	__u16 prefixlen; /* 0-31 for IPv4, 0-127 for IPv6; longer ones are exact */
	__u8 addr[16];
};

/* The prefix lengths a policy's CIDR entries use in one family, longest
 * first, so the first hit is the longest match. Written with the
 * generation's entries, before anything refers to the policy id. */
#define XG_MAX_PREFIX_LENS 128

struct prefix_lens_key {
	__u32 policy;
	__u32 family;
};

struct prefix_lens {
	__u32 count;
	__u8 lens[XG_MAX_PREFIX_LENS];
};

/* A copy of a policy's prefix lengths, both families, in an array the
 * programs read without hashing: slot = policy id % XG_PREFIX_SLOTS. The
 * agent writes a slot only while no live policy other than the one it
 * writes maps to it, so no program reads a slot being written; a policy
 * that finds its slot shared is read from xg_prefix_lens. */
#define XG_PREFIX_SLOTS 8192

struct prefix_slot {
	__u32 policy; /* 0: free */
	__u8 count[2]; /* IPv4, IPv6 */
	__u16 _pad;
	__u8 lens[2][XG_MAX_PREFIX_LENS];
};

struct peer_value {
	__u32 portset; /* XG_PORTSET_ANY or an index into xg_portsets */
};

struct portset_key {
	__u32 policy;
	__u32 index;
};

struct port_range {
	__u8 proto;
	__u8 _pad;
	__u16 first; /* host byte order, inclusive */
	__u16 last;
};

struct portset {
	__u32 count;
	struct port_range ranges[XG_MAX_PORT_RANGES];
};

/* Service frontends (cluster, external and load-balancer IPs, or whole
 * service CIDRs): prefixlen = 32 + prefix bits. */
struct frontend_key {
	__u32 prefixlen;
	__u32 family;
	__u8 addr[16];
};

/* A tracked flow, named from the pod's side whichever way the packet goes,
 * so one lookup finds it for both directions. */
struct flow_key {
	__u32 ifindex;
	__u8 family;
	__u8 proto;
	__u16 pod_port;
	__u16 peer_port;
	__u16 _pad;
	__u8 pod_addr[16];
	__u8 peer_addr[16];
};

struct flow_value {
	__u64 expires; /* bpf_ktime_get_coarse_ns() deadline */
	__u32 policy;  /* id of the origin direction's policy that allowed it */
	__u8 origin;   /* XG_DIR_* of the packet that opened the flow */
	__u8 closing;  /* TCP FIN or RST seen: short timeout */
	__u16 policy_port; /* destination port the policy matched */
	/* The peer the origin policy was checked against: the flow's peer, or for a
	 * Service flow the endpoint after DNAT. */
	__u8 policy_addr[16];
};

enum xg_stat {
	XG_STAT_ALLOWED,
	XG_STAT_REPLY,
	XG_STAT_DENIED,
	XG_STAT_SPOOFED,
	XG_STAT_DEFERRED,
	XG_STAT_MALFORMED,
	XG_STAT_POST_NAT_ALLOWED,
	XG_STAT_POST_NAT_DENIED,
	XG_STAT_RELATED,
	XG_STAT_MAX,
};

/* Keeps the enum in BTF so bpf2go emits it for the Go side. */
const enum xg_stat *xg_stat_btf __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* replaced elements are freed after RCU */
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct endpoint);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct endpoint_addr_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_ep_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 262144);
	__type(key, struct peer_key);
	__type(value, struct peer_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct peer_cidr_key);
	__type(value, struct peer_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_peers_cidr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct prefix_lens_key);
	__type(value, struct prefix_lens);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_prefix_lens SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XG_PREFIX_SLOTS);
	__type(key, __u32);
	__type(value, struct prefix_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_prefix_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct portset_key);
	__type(value, struct portset);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_portsets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct frontend_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_frontends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_flows SEC(".maps");

/* Room for counters added later without changing the pinned map's layout. */
#define XG_STAT_SLOTS 32

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XG_STAT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_stats SEC(".maps");

static __always_inline void count(enum xg_stat s)
{
	__u32 k = s;
	__u64 *v = bpf_map_lookup_elem(&xg_stats, &k);
	if (v)
		*v += 1;
}

/* State the agent keeps across restarts; entry 0 is the next policy id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xg_state SEC(".maps");
