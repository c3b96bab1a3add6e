package compiler_test

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/reference"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// FuzzCompile builds a small random cluster from the fuzz input, compiles
// it, and compares every (source, destination, protocol, port) with the
// reference evaluator: the compiled result must never allow what the
// reference denies, and must agree exactly for pods that compiled without
// error.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{"", "\x01\x02\x03", "policy-with-everything-0123456789", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		cl := g.cluster()
		compiled := map[*corev1.Pod]compiler.PodRules{}
		c := compiler.New(compiler.Input{Pods: cl.Pods, Namespaces: cl.Namespaces, NetworkPolicies: cl.NetworkPolicies},
			compiler.Options{HostPeers: cl.HostPeers})
		for _, p := range cl.Pods {
			r, ok := c.Pod(k8stypes.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			if !ok {
				t.Fatalf("pod %s/%s missing from result", p.Namespace, p.Name)
			}
			compiled[p] = r
		}
		for _, src := range endpoints(cl) {
			for _, dst := range endpoints(cl) {
				for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
					for _, port := range probePorts {
						want := cl.Allowed(src, dst, proto, port)
						got, exact := compiledAllowed(compiled, src, dst, proto, port)
						if got && !want {
							t.Fatalf("compiled allows what the reference denies: %s -> %s %s/%d\n%s", name(src), name(dst), proto, port, describe(cl, compiled))
						}
						if exact && got != want {
							t.Fatalf("compiled %v, reference %v: %s -> %s %s/%d\n%s", got, want, name(src), name(dst), proto, port, describe(cl, compiled))
						}
					}
				}
			}
		}
	})
}

var probePorts = []int32{53, 79, 80, 85, 90, 8080, 9999}

// compiledAllowed evaluates the compiled rule sets the way the dataplane
// does; exact is false when a pod involved fell back to deny-all.
func compiledAllowed(compiled map[*corev1.Pod]compiler.PodRules, src, dst reference.Endpoint, proto corev1.Protocol, port int32) (allowed, exact bool) {
	p := rules.Protocol(map[corev1.Protocol]uint8{"TCP": 6, "UDP": 17, "SCTP": 132}[proto])
	allowed, exact = true, true
	if src.Pod != nil && !src.Pod.Spec.HostNetwork {
		r := compiled[src.Pod]
		allowed = allowed && r.Egress.Allows(dst.Addr, p, uint16(port))
		exact = exact && r.Err == nil
	}
	if dst.Pod != nil && !dst.Pod.Spec.HostNetwork {
		r := compiled[dst.Pod]
		allowed = allowed && r.Ingress.Allows(src.Addr, p, uint16(port))
		exact = exact && r.Err == nil
	}
	return allowed, exact
}

// endpoints are every pod address plus addresses that belong to no pod.
func endpoints(cl reference.Cluster) []reference.Endpoint {
	var out []reference.Endpoint
	for _, p := range cl.Pods {
		for _, ip := range p.Status.PodIPs {
			out = append(out, reference.Endpoint{Pod: p, Addr: netip.MustParseAddr(ip.IP)})
		}
	}
	for _, a := range []string{"10.0.9.9", "10.1.0.1", "192.168.7.7", "fd00::99", "fd01::1"} {
		out = append(out, reference.Endpoint{Addr: netip.MustParseAddr(a)})
	}
	return out
}

func name(e reference.Endpoint) string {
	if e.Pod == nil {
		return e.Addr.String()
	}
	return fmt.Sprintf("%s/%s(%s)", e.Pod.Namespace, e.Pod.Name, e.Addr)
}

func describe(cl reference.Cluster, compiled map[*corev1.Pod]compiler.PodRules) string {
	s := ""
	for _, ns := range cl.Namespaces {
		s += fmt.Sprintf("ns %s %v\n", ns.Name, ns.Labels)
	}
	for _, p := range cl.Pods {
		r := compiled[p]
		s += fmt.Sprintf("pod %s/%s %v ips=%v host=%v ports=%v\n  in=%s\n  eg=%s err=%v\n", p.Namespace, p.Name, p.Labels,
			p.Status.PodIPs, p.Spec.HostNetwork, p.Spec.Containers[0].Ports, r.Ingress, r.Egress, r.Err)
	}
	for _, np := range cl.NetworkPolicies {
		s += fmt.Sprintf("policy %s/%s %+v\n", np.Namespace, np.Name, np.Spec)
	}
	return s + fmt.Sprintf("hostPeers %v\n", cl.HostPeers)
}

// gen draws choices from the fuzz input; past its end every draw is 0.
type gen struct {
	data []byte
	pos  int
}

func (g *gen) n(k int) int {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return int(b) % k
}

func (g *gen) pick(options ...string) string { return options[g.n(len(options))] }

func (g *gen) cluster() reference.Cluster {
	cl := reference.Cluster{}
	for _, ns := range []string{"x", "y", "z"} {
		cl.Namespaces = append(cl.Namespaces, fx.Namespace(ns, "team", g.pick("a", "b")))
	}
	nPods := 1 + g.n(6)
	for i := range nPods {
		ns := g.pick("x", "y", "z")
		b := fx.MakePod(ns, fmt.Sprintf("p%d", i)).Label("app", g.pick("a", "b", "c"))
		switch g.n(8) {
		case 0:
			b.IPs("192.168.0.10").HostNetwork()
		case 1:
			b.IPs(fmt.Sprintf("10.0.%d.%d", i%2, i+1), fmt.Sprintf("fd00::%d", i+1))
		case 2:
			b.IPs(fmt.Sprintf("10.0.%d.%d", i%2, i+1)).Phase(corev1.PodSucceeded)
		default:
			b.IPs(fmt.Sprintf("10.0.%d.%d", i%2, i+1))
		}
		switch g.n(4) {
		case 0:
			b.Port("http", corev1.ProtocolTCP, 80)
		case 1:
			b.Port("http", corev1.ProtocolTCP, 8080).Port("dns", corev1.ProtocolUDP, 53)
		case 2:
			b.Port("s", corev1.ProtocolSCTP, 80).Port("http", corev1.ProtocolUDP, 80)
		}
		cl.Pods = append(cl.Pods, b.Obj())
	}
	for i := range 1 + g.n(4) {
		cl.NetworkPolicies = append(cl.NetworkPolicies, g.policy(i))
	}
	if g.n(4) == 0 {
		cl.HostPeers = []netip.Prefix{netip.MustParsePrefix("192.168.0.10/32")}
	}
	return cl
}

func (g *gen) policy(i int) *networkingv1.NetworkPolicy {
	b := fx.MakePolicy(g.pick("x", "y", "z"), fmt.Sprintf("np%d", i))
	switch g.n(3) {
	case 1:
		b.Select("app", g.pick("a", "b", "c"))
	case 2:
		b.Obj().Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	}
	switch g.n(4) {
	case 1:
		b.Types(networkingv1.PolicyTypeIngress)
	case 2:
		b.Types(networkingv1.PolicyTypeEgress)
	case 3:
		b.Types(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	}
	for range g.n(3) {
		b.Ingress(g.peers(), g.ports()...)
	}
	for range g.n(3) {
		b.Egress(g.peers(), g.ports()...)
	}
	return b.Obj()
}

func (g *gen) peers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range g.n(3) {
		switch g.n(6) {
		case 0:
			out = append(out, fx.PodPeer(g.selector("app", "a", "b", "c")))
		case 1:
			out = append(out, fx.NamespacePeer(g.selector("team", "a", "b")))
		case 2:
			out = append(out, fx.PodInNamespacePeer(g.selector("team", "a", "b"), g.selector("app", "a", "b", "c")))
		case 3:
			out = append(out, fx.BlockPeer(g.pick("10.0.0.0/16", "10.0.0.0/24", "0.0.0.0/0", "10.0.0.2/32", "fd00::/64", "192.168.0.0/16")))
		case 4:
			out = append(out, fx.BlockPeer("10.0.0.0/16", g.pick("10.0.1.0/24", "10.0.0.2/32", "10.0.0.0/30")))
		case 5:
			out = append(out, fx.BlockPeer(g.pick("0.0.0.0/0", "::/0"), g.pick("10.0.0.0/8", "fd00::/16")))
		}
	}
	return out
}

func (g *gen) selector(key string, values ...string) *metav1.LabelSelector {
	if g.n(3) == 0 {
		return fx.Labels()
	}
	return fx.Labels(key, g.pick(values...))
}

func (g *gen) ports() []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for range g.n(3) {
		proto := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}[g.n(3)]
		switch g.n(5) {
		case 0:
			out = append(out, fx.Port(proto, []int32{53, 80, 8080}[g.n(3)]))
		case 1:
			out = append(out, fx.PortRange(proto, 79, 85))
		case 2:
			out = append(out, fx.NamedPort(proto, g.pick("http", "dns", "s")))
		case 3:
			out = append(out, fx.AllPorts(proto))
		case 4:
			out = append(out, fx.PortRange(proto, 80, 9999))
		}
	}
	return out
}
