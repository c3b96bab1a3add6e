//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/agent/reference"
)

// truth computes what every probe must see from the objects in the API,
// with the agent's reference evaluator (the Kubernetes semantics, read
// directly from the policies).
//
// Two paths never reach the dataplane's judgement the way a pair of
// different pods does, and the truth says so:
//   - a pod dialling its own IP stays inside its network namespace
//     (local delivery), so it always connects;
//   - a pod dialling its own Service is DNATed back to itself and
//     masqueraded by kube-proxy (hairpin), so its egress policy decides
//     and its ingress policy sees the node, which may always connect.
func (m *model) truth(ctx context.Context, denyAll map[podRef]bool) (map[probeKey]bool, error) {
	c := reference.Cluster{}
	byRef := map[podRef]*corev1.Pod{}
	for _, ns := range modelNamespaces {
		n, err := m.cs.CoreV1().Namespaces().Get(ctx, m.ns(ns), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		c.Namespaces = append(c.Namespaces, n)
		pods, err := m.cs.CoreV1().Pods(m.ns(ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			c.Pods = append(c.Pods, p)
			byRef[podRef{ns, p.Name}] = p
		}
		nps, err := m.cs.NetworkingV1().NetworkPolicies(m.ns(ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range nps.Items {
			c.NetworkPolicies = append(c.NetworkPolicies, &nps.Items[i])
		}
	}
	out := map[probeKey]bool{}
	for _, src := range m.order {
		for _, dst := range m.order {
			s := reference.Endpoint{Pod: byRef[src], Addr: netip.MustParseAddr(m.ips[src])}
			d := reference.Endpoint{Pod: byRef[dst], Addr: netip.MustParseAddr(m.ips[dst])}
			if s.Pod == nil || d.Pod == nil {
				return nil, fmt.Errorf("pod %s or %s missing", src, dst)
			}
			for _, p := range modelPorts {
				byIP := c.Allowed(s, d, p.protocol(), p.port)
				bySvc := byIP
				if src == dst {
					byIP = true
					bySvc = c.EgressAllowed(s, d, p.protocol(), p.port)
				}
				// A pod that fell back to deny-all talks to nobody but
				// itself.
				if denyAll[src] || denyAll[dst] {
					bySvc = false
					if src != dst {
						byIP = false
					}
				}
				out[probeKey{src, dst, p, false}] = byIP
				out[probeKey{src, dst, p, true}] = bySvc
			}
		}
	}
	return out, nil
}

// table renders one port's verdicts as the usual truth table, rows are
// sources and columns destinations; "." connects, "X" does not, and a
// mismatch shows what was observed in brackets.
func (m *model) table(want, got map[probeKey]bool, port modelPort, viaSvc bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s via %s:\n      ", port, map[bool]string{false: "pod IP", true: "Service"}[viaSvc])
	for _, dst := range m.order {
		fmt.Fprintf(&b, "%-5s", dst)
	}
	b.WriteString("\n")
	mark := func(ok bool) string {
		if ok {
			return "."
		}
		return "X"
	}
	for _, src := range m.order {
		fmt.Fprintf(&b, "%-6s", src)
		for _, dst := range m.order {
			k := probeKey{src, dst, port, viaSvc}
			cell := mark(want[k])
			if got[k] != want[k] {
				cell = "[" + mark(got[k]) + "]"
			}
			fmt.Fprintf(&b, "%-5s", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Policy builders for the scenarios. Namespaces are model names; apply
// maps them to the real ones.

func np(ns, name string, sel *metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *sel, PolicyTypes: types},
	}
}

func withIngress(p *networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	p.Spec.Ingress = append(p.Spec.Ingress, rules...)
	return p
}

func withEgress(p *networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	p.Spec.Egress = append(p.Spec.Egress, rules...)
	return p
}

func from(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyIngressRule {
	return networkingv1.NetworkPolicyIngressRule{From: peers, Ports: ports}
}

func to(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{To: peers, Ports: ports}
}

func peers(p ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return p }

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func podPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func nsPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func nsPodPeer(ns, pod *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pod}
}

func blockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func port(proto corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
	v := intstrInt(p)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func portRange(proto corev1.Protocol, p, end int32) networkingv1.NetworkPolicyPort {
	r := port(proto, p)
	r.EndPort = &end
	return r
}

func namedPort(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	v := intstrString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

var (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
	in   = networkingv1.PolicyTypeIngress
	eg   = networkingv1.PolicyTypeEgress
)
