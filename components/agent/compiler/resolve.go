package compiler

import (
	"net/netip"

	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// everything is the peer set of an empty from/to: every address of both
// families, inside or outside the cluster.
var everything = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// peerTarget is a pod that a rule's peers reach, with the addresses by which
// they reach it: all of them through a selector, only those inside the
// block through an ipBlock.
type peerTarget struct {
	pod *podInfo
	ips []netip.Addr
}

// resolvedRule is what a rule's peers resolve to; it does not depend on the
// pod the rule protects, so it is computed once per rule.
type resolvedRule struct {
	// prefixes are every address the peers cover, sorted for
	// rules.Builder.AddSorted.
	prefixes []netip.Prefix
	// egress holds the rule's complete egress contributions, including
	// named ports resolved against each destination pod, sorted.
	egress []rules.Entry
}

func (c *Compiler) resolve(p *policy, r *rule, egress bool) *resolvedRule {
	key := ruleRef{rule: r, egress: egress}
	if got, ok := c.resolved[key]; ok {
		return got
	}
	res := &resolvedRule{}
	var targets []peerTarget
	if r.allPeers {
		res.prefixes = everything
		if egress && len(r.named) > 0 {
			for _, pod := range c.ix.eligible() {
				targets = append(targets, peerTarget{pod: pod, ips: pod.ips})
			}
		}
	}
	for _, pr := range r.peers {
		if pr.isBlock {
			res.prefixes = append(res.prefixes, rules.Subtract(pr.cidr, pr.except)...)
			if egress && len(r.named) > 0 {
				targets = append(targets, c.podsInBlock(pr)...)
			}
			continue
		}
		for _, pod := range c.ix.selectPeers(pr, p.namespace) {
			for _, ip := range pod.ips {
				res.prefixes = append(res.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			}
			targets = append(targets, peerTarget{pod: pod, ips: pod.ips})
		}
	}
	if egress {
		res.egress = rules.SortEntries(egressContributions(r, res.prefixes, targets))
	}
	res.prefixes = rules.SortPrefixes(res.prefixes)
	c.resolved[key] = res
	return res
}

// podsInBlock returns the pods with an address inside the block's CIDR and
// outside its exceptions, with just those addresses.
func (c *Compiler) podsInBlock(pr peer) []peerTarget {
	var out []peerTarget
	for _, pod := range c.ix.eligible() {
		var ips []netip.Addr
		for _, ip := range pod.ips {
			if pr.cidr.Contains(ip) && !containsAny(pr.except, ip) {
				ips = append(ips, ip)
			}
		}
		if len(ips) > 0 {
			out = append(out, peerTarget{pod: pod, ips: ips})
		}
	}
	return out
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// egressContributions: numeric ports apply to every peer address; a named
// port means, for each destination pod, that pod's own port of that name.
func egressContributions(r *rule, prefixes []netip.Prefix, targets []peerTarget) []rules.Entry {
	if r.allPorts {
		return withPorts(prefixes, rules.AnyPort)
	}
	out := withPorts(prefixes, r.numeric)
	for _, t := range targets {
		ports := resolveNamed(r.named, t.pod)
		if ports.Empty() {
			continue
		}
		for _, ip := range t.ips {
			out = append(out, rules.Entry{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Ports: ports})
		}
	}
	return out
}

func withPorts(prefixes []netip.Prefix, ports rules.PortSet) []rules.Entry {
	if ports.Empty() {
		return nil
	}
	out := make([]rules.Entry, 0, len(prefixes))
	for _, p := range prefixes {
		out = append(out, rules.Entry{Prefix: p, Ports: ports})
	}
	return out
}

// resolveNamed returns the ports the names denote on pod; a name the pod
// does not have matches nothing there.
func resolveNamed(named []namedPort, pod *podInfo) rules.PortSet {
	var ranges []rules.PortRange
	for _, np := range named {
		proto := rules.Protocol(protoNumber[np.proto])
		for _, port := range pod.resolveNamed(np) {
			ranges = append(ranges, rules.PortRange{Protocol: proto, First: port, Last: port})
		}
	}
	return rules.PortSet{Ranges: ranges}.Normalize()
}
