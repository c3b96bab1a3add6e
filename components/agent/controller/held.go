package controller

import (
	"net/netip"
	"slices"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// A pod's network comes up before the agent can name the pod: the CNI
// plugin creates the host-side veth and the host route while the sandbox
// starts, the containers start next, and the kubelet posts the pod's
// address to the API only after that. An interface that looks like a pod's
// (hostnet.State.PodInterfaces) but carries no address of a known local pod
// is held: it gets rules at once, with the addresses of its host route, and
// is switched to its own pod's rules when the address arrives.
//
// Its owner is one of the pending pods: bound to this node (spec.nodeName,
// seen before the sandbox exists), with their own network namespace, not
// finished, and without an address yet. Per direction the interface gets
// the rules all of them agree on, which are exactly its own pod's rules
// whichever of them it is; where they differ it denies everything but the
// node's own traffic in, so the kubelet's probes still reach it. An
// interface every pending pod would leave open (no policy selects any of
// them) is left alone: pods no policy selects never lose a packet to this.

// holdRules returns the rules of an interface whose pod is one of pending
// (their compiled rules), or nothing isolated when none is isolated.
func holdRules(pending []compiler.PodRules, hostPeers []netip.Prefix) (ingress, egress rules.RuleSet) {
	if len(pending) == 0 {
		return rules.AllowAll, rules.AllowAll
	}
	ingress, egress = pending[0].Ingress, pending[0].Egress
	for _, r := range pending[1:] {
		if !r.Ingress.Equal(ingress) {
			ingress = nodeOnly(hostPeers)
		}
		if !r.Egress.Equal(egress) {
			egress = rules.DenyAll
		}
	}
	return ingress, egress
}

// nodeOnly is an isolated ingress rule set that admits the node's own
// addresses, on every port, and nothing else.
func nodeOnly(hostPeers []netip.Prefix) rules.RuleSet {
	var b rules.Builder
	for _, p := range hostPeers {
		b.Add(p, rules.AnyPort)
	}
	return b.Build(true)
}

// heldInterfaces returns the pod interfaces of the node that belong to none
// of the judged local pods, with the given rules, unless those leave the
// interface open in both directions.
func heldInterfaces(host hostnet.State, local []enforcer.Pod, ingress, egress rules.RuleSet) []enforcer.Held {
	if !ingress.Isolated && !egress.Isolated {
		return nil
	}
	judged := map[int]bool{}
	for _, p := range local {
		judged[p.Endpoint.Ifindex] = true
	}
	var out []enforcer.Held
	for ifindex := range host.PodInterfaces {
		if judged[ifindex] {
			continue
		}
		addrs := host.RoutedThrough(ifindex)
		if len(addrs) == 0 {
			continue
		}
		out = append(out, enforcer.Held{Endpoint: dataplane.Endpoint{Ifindex: ifindex, Addrs: addrs}, Ingress: ingress, Egress: egress})
	}
	slices.SortFunc(out, func(a, b enforcer.Held) int { return a.Endpoint.Ifindex - b.Endpoint.Ifindex })
	return out
}

// noteHeld updates the held-interface metrics and logs interfaces that
// start or stop being held, and why.
func (c *Controller) noteHeld(held []enforcer.Held, why string) {
	now := map[int]bool{}
	for _, h := range held {
		now[h.Endpoint.Ifindex] = true
		if !c.held[h.Endpoint.Ifindex] {
			c.deps.Metrics.InterfaceHolds.Inc()
			c.deps.Log.Info("holding a pod interface until its pod is known", "interface", h.Endpoint.Ifindex,
				"addresses", addrStrings(h.Endpoint.Addrs), "reason", why,
				"ingress", holdKind(h.Ingress), "egress", holdKind(h.Egress))
		}
	}
	for ifindex := range c.held {
		if !now[ifindex] {
			c.deps.Log.Info("pod interface no longer held", "interface", ifindex)
		}
	}
	c.held = now
	c.deps.Metrics.InterfacesHeld.Set(float64(len(held)))
}

// holdKind says what a held interface's rules are, for its log line.
func holdKind(r rules.RuleSet) string {
	switch {
	case !r.Isolated:
		return "open"
	case len(r.Entries) == 0:
		return "deny"
	default:
		return "isolated"
	}
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out
}
