//go:build e2e

package e2e

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func intstrInt(p int32) intstr.IntOrString     { return intstr.FromInt32(p) }
func intstrString(s string) intstr.IntOrString { return intstr.FromString(s) }

// scenario is one step of the suite: the complete desired state of the
// policies and of the extra pod and namespace labels. Each step is applied
// as a difference to the previous one, so the sequence creates, changes
// and deletes policies and relabels pods and namespaces.
type scenario struct {
	name      string
	policies  func(m *model) []*networkingv1.NetworkPolicy
	podLabels map[podRef]map[string]string // added to pod=<name>
	nsLabels  map[string]map[string]string // added to ns=<name>
	// denyAll lists pods whose policy cannot be installed exactly: they
	// must fall back to deny-all, with an Event.
	denyAll []podRef
	// restartAgents deletes the agent pods before probing: the pinned
	// dataplane must keep enforcing while they come back.
	restartAgents bool
}

func none(*model) []*networkingv1.NetworkPolicy { return nil }

func policies(ps ...*networkingv1.NetworkPolicy) func(*model) []*networkingv1.NetworkPolicy {
	return func(*model) []*networkingv1.NetworkPolicy { return ps }
}

var xa = podRef{"x", "a"}

// scenarios is the conformance sequence.
func scenarios() []scenario {
	all := &metav1.LabelSelector{}
	denyIngressX := np("x", "deny-ingress", nil, in)
	denyEgressX := np("x", "deny-egress", nil, eg)
	podA := sel("pod", "a")
	return []scenario{
		{name: "no policies: everything connects", policies: none},
		{name: "default deny ingress in x", policies: policies(denyIngressX)},
		{name: "default deny egress in x", policies: policies(denyEgressX)},
		{name: "default deny both directions in x", policies: policies(np("x", "deny-all", nil, in, eg))},
		{name: "deny plus allow-all ingress: union allows", policies: policies(np("x", "deny-all", nil, in, eg),
			withIngress(np("x", "allow-all-ingress", nil, in), from(nil)))},
		{name: "deny plus allow-all egress: union allows", policies: policies(np("x", "deny-all", nil, in, eg),
			withEgress(np("x", "allow-all-egress", nil, eg), to(nil)))},
		{name: "ingress to x/a from pods b of x", policies: policies(
			withIngress(np("x", "a-from-b", podA, in), from(peers(podPeer(sel("pod", "b"))))))},
		{name: "ingress to x/a from namespace y", policies: policies(
			withIngress(np("x", "a-from-y", podA, in), from(peers(nsPeer(sel("ns", "y"))))))},
		{name: "ingress to x/a from pods b in namespace y (intersection)", policies: policies(
			withIngress(np("x", "a-from-y-b", podA, in), from(peers(nsPodPeer(sel("ns", "y"), sel("pod", "b"))))))},
		{name: "ingress to x/a from namespace y or pods b of x (two peers)", policies: policies(
			withIngress(np("x", "a-from-y-b", podA, in), from(peers(nsPeer(sel("ns", "y")), podPeer(sel("pod", "b"))))))},
		{name: "ingress to x/a from pods In (b, c) of x", policies: policies(
			withIngress(np("x", "a-from-bc", podA, in), from(peers(podPeer(expr("pod", metav1.LabelSelectorOpIn, "b", "c"))))))},
		{name: "ingress to x/a from namespaces NotIn (x)", policies: policies(
			withIngress(np("x", "a-from-not-x", podA, in), from(peers(nsPeer(expr("ns", metav1.LabelSelectorOpNotIn, "x"))))))},
		{name: "ingress to x from pods c of every namespace", policies: policies(
			withIngress(np("x", "from-any-c", nil, in), from(peers(nsPodPeer(all, sel("pod", "c"))))))},
		{name: "ingress to pods DoesNotExist team in x from namespace z by name", policies: func(m *model) []*networkingv1.NetworkPolicy {
			return []*networkingv1.NetworkPolicy{withIngress(np("x", "from-z", expr("team", metav1.LabelSelectorOpDoesNotExist), in),
				from(peers(nsPeer(sel("kubernetes.io/metadata.name", m.ns("z"))))))}
		}, podLabels: map[podRef]map[string]string{{"x", "c"}: {"team": "blue"}}},
		{name: "ingress to x/a on TCP 80 only", policies: policies(
			withIngress(np("x", "a-tcp-80", podA, in), from(nil, port(tcp, 80))))},
		{name: "ingress to x/a on UDP 81 only", policies: policies(
			withIngress(np("x", "a-udp-81", podA, in), from(nil, port(udp, 81))))},
		{name: "ingress to x/a on named port serve-81-tcp", policies: policies(
			withIngress(np("x", "a-named", podA, in), from(nil, namedPort(tcp, "serve-81-tcp"))))},
		{name: "ingress to x/a on named port serve-80-udp from y", policies: policies(
			withIngress(np("x", "a-named", podA, in), from(peers(nsPeer(sel("ns", "y"))), namedPort(udp, "serve-80-udp"))))},
		{name: "ingress to x/a on TCP 80-81 (endPort)", policies: policies(
			withIngress(np("x", "a-range", podA, in), from(nil, portRange(tcp, 80, 81))))},
		{name: "ingress to x/a on UDP 81-90 (endPort)", policies: policies(
			withIngress(np("x", "a-range", podA, in), from(nil, portRange(udp, 81, 90))))},
		{name: "ingress to x/a on SCTP 80 only: TCP and UDP 80 stay closed", policies: policies(
			withIngress(np("x", "a-sctp", podA, in), from(nil, port(sctp, 80))))},
		{name: "egress from x/a to namespace y", policies: policies(
			withEgress(np("x", "a-to-y", podA, eg), to(peers(nsPeer(sel("ns", "y"))))))},
		{name: "egress from x/a on TCP 80 only", policies: policies(
			withEgress(np("x", "a-to-80", podA, eg), to(nil, port(tcp, 80))))},
		{name: "egress from x/a on named port serve-81-udp", policies: policies(
			withEgress(np("x", "a-named", podA, eg), to(nil, namedPort(udp, "serve-81-udp"))))},
		{name: "egress from x/a to namespace z on TCP 80-81 (endPort)", policies: policies(
			withEgress(np("x", "a-range", podA, eg), to(peers(nsPeer(sel("ns", "z"))), portRange(tcp, 80, 81))))},
		{name: "egress from x/a on SCTP 80 only: no TCP or UDP", policies: policies(
			withEgress(np("x", "a-sctp", podA, eg), to(nil, port(sctp, 80))))},
		{name: "ingress to x/a from the pod network except z/c (ipBlock)", policies: func(m *model) []*networkingv1.NetworkPolicy {
			return []*networkingv1.NetworkPolicy{withIngress(np("x", "a-block", podA, in),
				from(peers(blockPeer("10.244.0.0/16", m.ips[podRef{"z", "c"}]+"/32"))))}
		}},
		{name: "egress from x/a to everything except y/a and z/b (ipBlock)", policies: func(m *model) []*networkingv1.NetworkPolicy {
			return []*networkingv1.NetworkPolicy{withEgress(np("x", "a-block", podA, eg),
				to(peers(blockPeer("0.0.0.0/0", m.ips[podRef{"y", "a"}]+"/32", m.ips[podRef{"z", "b"}]+"/32"))))}
		}},
		{name: "ingress to y from x/a's address only (ipBlock /32)", policies: func(m *model) []*networkingv1.NetworkPolicy {
			return []*networkingv1.NetworkPolicy{withIngress(np("y", "from-xa", nil, in),
				from(peers(blockPeer(m.ips[xa]+"/32"))))}
		}},
		{name: "two policies on x/a: y on TCP 80, z on UDP 81 (union)", policies: policies(
			withIngress(np("x", "a-from-y", podA, in), from(peers(nsPeer(sel("ns", "y"))), port(tcp, 80))),
			withIngress(np("x", "a-from-z", podA, in), from(peers(nsPeer(sel("ns", "z"))), port(udp, 81))))},
		{name: "policies in three namespaces", policies: policies(
			np("x", "deny-ingress", nil, in), np("y", "deny-ingress", nil, in), np("z", "deny-egress", nil, eg))},
		{name: "change: z denies ingress instead of egress", policies: policies(
			np("x", "deny-ingress", nil, in), np("y", "deny-ingress", nil, in), np("z", "deny-egress", nil, in))},
		{name: "delete: only y keeps its policy", policies: policies(np("y", "deny-ingress", nil, in))},
		{name: "policy on pods In (a, b) of x", policies: policies(
			np("x", "deny-ab", expr("pod", metav1.LabelSelectorOpIn, "a", "b"), in))},
		{name: "change the policy's selector to pod c", policies: policies(
			np("x", "deny-ab", sel("pod", "c"), in))},
		{name: "x/a admits team=blue, which nobody has yet", policies: policies(
			withIngress(np("x", "a-from-blue", podA, in), from(peers(nsPodPeer(all, sel("team", "blue"))))))},
		{name: "relabel y/b team=blue: admitted", policies: policies(
			withIngress(np("x", "a-from-blue", podA, in), from(peers(nsPodPeer(all, sel("team", "blue")))))),
			podLabels: map[podRef]map[string]string{{"y", "b"}: {"team": "blue"}}},
		{name: "relabel y/b back and x/c team=blue", policies: policies(
			withIngress(np("x", "a-from-blue", podA, in), from(peers(nsPodPeer(all, sel("team", "blue")))))),
			podLabels: map[podRef]map[string]string{{"x", "c"}: {"team": "blue"}}},
		{name: "x/a admits namespaces env=prod, which none is", policies: policies(
			withIngress(np("x", "a-from-prod", podA, in), from(peers(nsPeer(sel("env", "prod"))))))},
		{name: "relabel namespace y env=prod: admitted", policies: policies(
			withIngress(np("x", "a-from-prod", podA, in), from(peers(nsPeer(sel("env", "prod")))))),
			nsLabels: map[string]map[string]string{"y": {"env": "prod"}}},
		{name: "relabel: z env=prod, y no longer", policies: policies(
			withIngress(np("x", "a-from-prod", podA, in), from(peers(nsPeer(sel("env", "prod")))))),
			nsLabels: map[string]map[string]string{"z": {"env": "prod"}}},
		{name: "x/a to y/b on TCP 80 across both sides' policies", policies: policies(
			np("x", "deny-all", nil, in, eg), np("y", "deny-all", nil, in, eg),
			withEgress(np("x", "a-to-yb", podA, eg), to(peers(nsPodPeer(sel("ns", "y"), sel("pod", "b"))), port(tcp, 80))),
			withIngress(np("y", "b-from-xa", sel("pod", "b"), in), from(peers(nsPodPeer(sel("ns", "x"), podA)), port(tcp, 80))))},
		{name: "egress deny in x, allow to pods c of every namespace", policies: policies(
			np("x", "deny-egress", nil, eg), withEgress(np("x", "to-any-c", nil, eg), to(peers(nsPodPeer(all, sel("pod", "c"))))))},
		{name: "policyTypes Egress only: its ingress rule is ignored", policies: policies(
			withIngress(np("x", "egress-only", podA, eg), from(peers(podPeer(sel("pod", "b"))))))},
		{name: "rule with ports and no peers: TCP 81 and UDP 80 from everyone", policies: policies(
			withIngress(np("z", "ports-only", nil, in), from(nil, port(tcp, 81), port(udp, 80))))},
		{name: "more port ranges than the dataplane holds: x/a falls back to deny-all", policies: func(*model) []*networkingv1.NetworkPolicy {
			p := np("x", "too-many-ports", podA, in)
			var ports []networkingv1.NetworkPolicyPort
			for i := range int32(33) {
				ports = append(ports, port(tcp, 1000+2*i))
			}
			return []*networkingv1.NetworkPolicy{withIngress(p, from(peers(podPeer(sel("pod", "b"))), ports...))}
		}, denyAll: []podRef{xa}},
		{name: "default deny in x as two policies, ingress and egress", policies: policies(denyIngressX, denyEgressX)},
		{name: "agent restart keeps enforcing", policies: policies(denyIngressX, denyEgressX), restartAgents: true},
		{name: "delete every policy: everything connects again", policies: none},
	}
}
