package compiler

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// policy is a NetworkPolicy checked and parsed once, whatever number of
// pods it selects.
type policy struct {
	name      string // namespace/name
	namespace string
	// selector is nil when it could not be parsed; the policy then counts
	// as selecting every pod of its namespace, so that its error reaches
	// them all.
	selector labels.Selector
	ingress  bool // isolates selected pods for ingress
	egress   bool // isolates selected pods for egress
	from     []rule
	to       []rule
	// namedIngress is set when an ingress rule names a port, which then
	// depends on the protected pod's containers.
	namedIngress bool
	err          error
}

// rule is one ingress or egress rule.
type rule struct {
	allPeers bool // from/to is empty: every address
	peers    []peer
	allPorts bool // ports is empty: every protocol and port
	numeric  rules.PortSet
	named    []namedPort
}

// peer is one NetworkPolicyPeer. Exactly one of block and selection is used.
type peer struct {
	isBlock bool
	cidr    netip.Prefix
	except  []netip.Prefix
	// pods and namespaces are nil when absent. Only pods: the policy's
	// namespace. Only namespaces: every pod of those namespaces.
	pods       labels.Selector
	namespaces labels.Selector
}

// namedPort is a port given by name, resolved against a pod's containers.
type namedPort struct {
	name  string
	proto corev1.Protocol
}

func parsePolicy(np *networkingv1.NetworkPolicy) *policy {
	p := &policy{name: np.Namespace + "/" + np.Name, namespace: np.Namespace}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		p.err = fmt.Errorf("%w %s: podSelector: %w", ErrInvalidPolicy, p.name, err)
		return p
	}
	p.selector = sel
	p.ingress, p.egress = policyTypes(np)
	if err := p.parseRules(np); err != nil {
		p.err = fmt.Errorf("%w %s: %w", ErrInvalidPolicy, p.name, err)
	}
	return p
}

// policyTypes applies the API's default: Ingress always, Egress only when
// the policy has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func (p *policy) parseRules(np *networkingv1.NetworkPolicy) error {
	for _, t := range np.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			return fmt.Errorf("unknown policyType %q", t)
		}
	}
	// Rules of a direction the policy does not isolate have no effect.
	if p.ingress {
		for i, r := range np.Spec.Ingress {
			pr, err := parseRule(r.From, r.Ports)
			if err != nil {
				return fmt.Errorf("ingress[%d]: %w", i, err)
			}
			p.namedIngress = p.namedIngress || len(pr.named) > 0
			p.from = append(p.from, pr)
		}
	}
	if p.egress {
		for i, r := range np.Spec.Egress {
			pr, err := parseRule(r.To, r.Ports)
			if err != nil {
				return fmt.Errorf("egress[%d]: %w", i, err)
			}
			p.to = append(p.to, pr)
		}
	}
	return nil
}

func parseRule(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (rule, error) {
	r := rule{allPeers: len(peers) == 0, allPorts: len(ports) == 0}
	for i, np := range peers {
		pr, err := parsePeer(np)
		if err != nil {
			return rule{}, fmt.Errorf("peer %d: %w", i, err)
		}
		r.peers = append(r.peers, pr)
	}
	var numeric []rules.PortRange
	for i, pp := range ports {
		proto, err := parseProtocol(pp.Protocol)
		if err != nil {
			return rule{}, fmt.Errorf("ports[%d]: %w", i, err)
		}
		rng, named, err := parsePort(pp, rules.Protocol(protoNumber[proto]))
		if err != nil {
			return rule{}, fmt.Errorf("ports[%d]: %w", i, err)
		}
		if named != "" {
			r.named = append(r.named, namedPort{name: named, proto: proto})
			continue
		}
		numeric = append(numeric, rng)
	}
	r.numeric = rules.PortSet{Ranges: numeric}.Normalize()
	return r, nil
}

func parsePeer(np networkingv1.NetworkPolicyPeer) (peer, error) {
	if np.IPBlock != nil {
		if np.PodSelector != nil || np.NamespaceSelector != nil {
			return peer{}, fmt.Errorf("ipBlock cannot be combined with a selector")
		}
		return parseBlock(np.IPBlock)
	}
	if np.PodSelector == nil && np.NamespaceSelector == nil {
		return peer{}, fmt.Errorf("peer sets none of podSelector, namespaceSelector, ipBlock")
	}
	var p peer
	var err error
	if np.PodSelector != nil {
		if p.pods, err = metav1.LabelSelectorAsSelector(np.PodSelector); err != nil {
			return peer{}, fmt.Errorf("podSelector: %w", err)
		}
	}
	if np.NamespaceSelector != nil {
		if p.namespaces, err = metav1.LabelSelectorAsSelector(np.NamespaceSelector); err != nil {
			return peer{}, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	return p, nil
}

func parseBlock(b *networkingv1.IPBlock) (peer, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return peer{}, fmt.Errorf("ipBlock cidr: %w", err)
	}
	p := peer{isBlock: true, cidr: rules.Canonical(cidr)}
	for _, e := range b.Except {
		ep, err := netip.ParsePrefix(e)
		if err != nil {
			return peer{}, fmt.Errorf("ipBlock except: %w", err)
		}
		ep = rules.Canonical(ep)
		// The API requires each exception to lie strictly inside the CIDR;
		// anything else is a policy we cannot be sure to read as meant.
		if ep.Addr().Is4() != p.cidr.Addr().Is4() || !rules.Contains(p.cidr, ep) || ep.Bits() == p.cidr.Bits() {
			return peer{}, fmt.Errorf("ipBlock except %s is not strictly inside %s", e, b.CIDR)
		}
		p.except = append(p.except, ep)
	}
	return p, nil
}

var protoNumber = map[corev1.Protocol]uint8{
	corev1.ProtocolTCP:  uint8(rules.TCP),
	corev1.ProtocolUDP:  uint8(rules.UDP),
	corev1.ProtocolSCTP: uint8(rules.SCTP),
}

func parseProtocol(p *corev1.Protocol) (corev1.Protocol, error) {
	if p == nil {
		return corev1.ProtocolTCP, nil
	}
	if _, ok := protoNumber[*p]; !ok {
		return "", fmt.Errorf("unsupported protocol %q", *p)
	}
	return *p, nil
}

// parsePort returns either a numeric range or a port name.
func parsePort(pp networkingv1.NetworkPolicyPort, proto rules.Protocol) (rules.PortRange, string, error) {
	if pp.Port == nil {
		if pp.EndPort != nil {
			return rules.PortRange{}, "", fmt.Errorf("endPort without port")
		}
		return rules.PortRange{Protocol: proto, First: 0, Last: 65535}, "", nil
	}
	if pp.Port.Type == intstr.String {
		name := pp.Port.StrVal
		if errs := validation.IsValidPortName(name); len(errs) > 0 {
			return rules.PortRange{}, "", fmt.Errorf("port %q: %s", name, errs[0])
		}
		if pp.EndPort != nil {
			return rules.PortRange{}, "", fmt.Errorf("endPort with named port %q", name)
		}
		return rules.PortRange{}, name, nil
	}
	first := pp.Port.IntVal
	if first < 1 || first > 65535 {
		return rules.PortRange{}, "", fmt.Errorf("port %d out of range", first)
	}
	last := first
	if pp.EndPort != nil {
		last = *pp.EndPort
		if last < first || last > 65535 {
			return rules.PortRange{}, "", fmt.Errorf("endPort %d invalid for port %d", last, first)
		}
	}
	return rules.PortRange{Protocol: proto, First: uint16(first), Last: uint16(last)}, "", nil
}
