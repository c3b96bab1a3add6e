package reference_test

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/reference"
)

// The oracle's verdicts on the cases the Kubernetes documentation spells
// out; the compiler is fuzzed against these semantics.
func TestAllowed(t *testing.T) {
	xa := fx.MakePod("x", "a").Label("app", "a").IPs("10.0.0.1").Port("http", corev1.ProtocolTCP, 8080).Obj()
	xb := fx.MakePod("x", "b").Label("app", "b").IPs("10.0.0.2").Obj()
	ya := fx.MakePod("y", "a").Label("app", "a").IPs("10.0.1.1").Obj()
	host := fx.MakePod("y", "host").Label("app", "a").IPs("192.168.0.10").HostNetwork().Obj()
	pod := func(p *corev1.Pod) reference.Endpoint {
		return reference.Endpoint{Pod: p, Addr: netip.MustParseAddr(p.Status.PodIPs[0].IP)}
	}
	ext := reference.Endpoint{Addr: netip.MustParseAddr("203.0.113.9")}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}

	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		src, dst reference.Endpoint
		proto    corev1.Protocol
		port     int32
		want     bool
	}{
		{"no policy", nil, pod(xb), pod(xa), tcp, 80, true},
		{"isolated, no rule", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Obj()}, pod(xb), pod(xa), tcp, 80, false},
		{"other namespace's policy does not apply", []*networkingv1.NetworkPolicy{fx.MakePolicy("y", "p").Obj()}, pod(xb), pod(xa), tcp, 80, true},
		{"pod selector peer", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "b")))).Obj()},
			pod(xb), pod(xa), tcp, 80, true},
		{"pod selector is namespaced", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "a")))).Obj()},
			pod(ya), pod(xa), tcp, 80, false},
		{"namespace and pod selector intersect", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(
			fx.PodInNamespacePeer(fx.Labels("kubernetes.io/metadata.name", "y"), fx.Labels("app", "b")))).Obj()},
			pod(ya), pod(xa), tcp, 80, false},
		{"host network pods are not selected", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.NamespacePeer(fx.Labels()))).Obj()},
			pod(host), pod(xa), tcp, 80, false},
		{"ipBlock except", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("203.0.113.0/24", "203.0.113.8/29"))).Obj()},
			ext, pod(xa), tcp, 80, false},
		{"named ingress port is the protected pod's", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, fx.NamedPort(tcp, "http")).Obj()},
			ext, pod(xa), tcp, 8080, true},
		{"named egress port is the destination's", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Select("app", "b").Types(egress...).Egress(nil, fx.NamedPort(tcp, "http")).Obj()},
			pod(xb), pod(xa), tcp, 8080, true},
		{"named egress port to a non-pod", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Select("app", "b").Types(egress...).Egress(nil, fx.NamedPort(tcp, "http")).Obj()},
			pod(xb), ext, tcp, 8080, false},
		{"endPort", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, fx.PortRange(udp, 1000, 2000)).Obj()},
			ext, pod(xa), udp, 2000, true},
		{"protocol matters", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, fx.Port(udp, 80)).Obj()},
			ext, pod(xa), tcp, 80, false},
		{"union of policies", []*networkingv1.NetworkPolicy{
			fx.MakePolicy("x", "p1").Ingress(nil, fx.Port(tcp, 81)).Obj(),
			fx.MakePolicy("x", "p2").Ingress(nil, fx.Port(tcp, 80)).Obj()},
			ext, pod(xa), tcp, 80, true},
		{"egress isolation of the source", []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Select("app", "b").Types(egress...).Obj()},
			pod(xb), pod(xa), tcp, 80, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl := reference.Cluster{
				Pods:            []*corev1.Pod{xa, xb, ya, host},
				Namespaces:      []*corev1.Namespace{fx.Namespace("x"), fx.Namespace("y")},
				NetworkPolicies: tc.policies,
			}
			if got := cl.Allowed(tc.src, tc.dst, tc.proto, tc.port); got != tc.want {
				t.Fatalf("Allowed = %v, want %v", got, tc.want)
			}
		})
	}
}
