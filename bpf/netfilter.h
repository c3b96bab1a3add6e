/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Just the kernel types the netfilter program reads, relocated at load time
 * against the running kernel's BTF (CO-RE), so no kernel headers are needed. */
#pragma once

#include <linux/bpf.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)
struct net_device {
	int ifindex;
};

struct nf_hook_state {
	__u8 hook;
	__u8 pf;
	struct net_device *in;
};

struct sk_buff {
	unsigned int len;
	unsigned int data_len;
	unsigned char *data;
	unsigned long _nfct;
};

union nf_inet_addr {
	__u32 all[4];
};

union nf_conntrack_man_proto {
	__be16 all;
};

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
};

struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
	struct {
		union nf_inet_addr u3;
		union {
			__be16 all;
		} u;
		__u8 protonum;
	} dst;
};

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
};

struct nf_conn {
	struct nf_conntrack_tuple_hash tuplehash[2];
};
#pragma clang attribute pop

/* The program's context; its layout is checked by the verifier, not by
 * relocation. */
struct bpf_nf_ctx {
	const struct nf_hook_state *state;
	struct sk_buff *skb;
};

#define XG_NF_DROP 0
#define XG_NF_ACCEPT 1
#define XG_NFPROTO_IPV4 2
#define XG_NFPROTO_IPV6 10

/* Connection tracking: the low bits of skb->_nfct hold the packet's state. */
#define XG_NFCT_PTRMASK (~7UL)
#define XG_IP_CT_ESTABLISHED 0
#define XG_IP_CT_NEW 2
