package reference

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cluster is the state the verdicts are taken from.
type Cluster struct {
	Pods            []*corev1.Pod
	Namespaces      []*corev1.Namespace
	NetworkPolicies []*networkingv1.NetworkPolicy
	// HostPeers may always reach a pod, as with compiler.Options.
	HostPeers []netip.Prefix
}

// Endpoint is one end of a connection: a pod and the address it uses, or
// (Pod nil) an address that belongs to no pod.
type Endpoint struct {
	Pod  *corev1.Pod
	Addr netip.Addr
}

// Allowed reports whether src may open a connection to dst on proto/port:
// src's egress policies and dst's ingress policies must both allow it.
func (c Cluster) Allowed(src, dst Endpoint, proto corev1.Protocol, port int32) bool {
	return c.EgressAllowed(src, dst, proto, port) && c.IngressAllowed(src, dst, proto, port)
}

// EgressAllowed is the verdict of src's egress policies alone.
func (c Cluster) EgressAllowed(src, dst Endpoint, proto corev1.Protocol, port int32) bool {
	if !protected(src.Pod) {
		return true
	}
	isolated := false
	for _, np := range c.NetworkPolicies {
		if !selects(np, src.Pod) || !hasType(np, networkingv1.PolicyTypeEgress) {
			continue
		}
		isolated = true
		for _, r := range np.Spec.Egress {
			if c.peersMatch(r.To, np.Namespace, dst) && portsMatch(r.Ports, proto, port, namedPortsOf(dst)) {
				return true
			}
		}
	}
	return !isolated
}

// IngressAllowed is the verdict of dst's ingress policies alone.
func (c Cluster) IngressAllowed(src, dst Endpoint, proto corev1.Protocol, port int32) bool {
	if !protected(dst.Pod) {
		return true
	}
	isolated := false
	for _, np := range c.NetworkPolicies {
		if !selects(np, dst.Pod) || !hasType(np, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, r := range np.Spec.Ingress {
			if c.peersMatch(r.From, np.Namespace, src) && portsMatch(r.Ports, proto, port, dst.Pod) {
				return true
			}
		}
	}
	if !isolated {
		return true
	}
	for _, hp := range c.HostPeers {
		if hp.Contains(src.Addr.Unmap()) {
			return true
		}
	}
	return false
}

// protected: policies apply to pods with their own network namespace.
func protected(p *corev1.Pod) bool { return p != nil && !p.Spec.HostNetwork }

func selects(np *networkingv1.NetworkPolicy, p *corev1.Pod) bool {
	return np.Namespace == p.Namespace && matches(&np.Spec.PodSelector, p.Labels)
}

func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	for _, pt := range np.Spec.PolicyTypes {
		if pt == t {
			return true
		}
	}
	return false
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func (c Cluster) peersMatch(peers []networkingv1.NetworkPolicyPeer, policyNS string, e Endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if c.peerMatches(p, policyNS, e) {
			return true
		}
	}
	return false
}

func (c Cluster) peerMatches(p networkingv1.NetworkPolicyPeer, policyNS string, e Endpoint) bool {
	if p.IPBlock != nil {
		cidr, err := netip.ParsePrefix(p.IPBlock.CIDR)
		if err != nil || !cidr.Contains(e.Addr.Unmap()) {
			return false
		}
		for _, ex := range p.IPBlock.Except {
			if exp, err := netip.ParsePrefix(ex); err == nil && exp.Contains(e.Addr.Unmap()) {
				return false
			}
		}
		return true
	}
	if !isPeerPod(e) {
		return false
	}
	if p.NamespaceSelector == nil {
		if e.Pod.Namespace != policyNS {
			return false
		}
	} else if !matches(p.NamespaceSelector, c.namespaceLabels(e.Pod.Namespace)) {
		return false
	}
	return p.PodSelector == nil || matches(p.PodSelector, e.Pod.Labels)
}

// namedPortsOf returns the pod whose named ports an egress rule refers to:
// the destination, when it is a pod that can be a peer at all.
func namedPortsOf(e Endpoint) *corev1.Pod {
	if isPeerPod(e) {
		return e.Pod
	}
	return nil
}

// isPeerPod: selectors match running pods by an address of their own.
func isPeerPod(e Endpoint) bool {
	p := e.Pod
	if p == nil || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap() == e.Addr.Unmap() {
			return true
		}
	}
	return false
}

func (c Cluster) namespaceLabels(name string) map[string]string {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for _, ns := range c.Namespaces {
		if ns.Name == name {
			for k, v := range ns.Labels {
				l[k] = v
			}
		}
	}
	return l
}

// portsMatch: named ports are looked up on the destination pod — for
// ingress the protected pod, for egress the pod being reached.
func portsMatch(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int32, dst *corev1.Pod) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		want := corev1.ProtocolTCP
		if pp.Protocol != nil {
			want = *pp.Protocol
		}
		if want != proto {
			continue
		}
		switch {
		case pp.Port == nil:
			return true
		case pp.Port.Type == intstr.Int:
			end := pp.Port.IntVal
			if pp.EndPort != nil {
				end = *pp.EndPort
			}
			if pp.Port.IntVal <= port && port <= end {
				return true
			}
		case dst != nil:
			for _, ctr := range dst.Spec.Containers {
				for _, cp := range ctr.Ports {
					cpProto := cp.Protocol
					if cpProto == "" {
						cpProto = corev1.ProtocolTCP
					}
					if cp.Name == pp.Port.StrVal && cpProto == proto && cp.ContainerPort == port {
						return true
					}
				}
			}
		}
	}
	return false
}
