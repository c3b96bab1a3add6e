package compiler_test

import (
	"errors"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
)

const (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
)

// cluster is the fixed cluster every translation case starts from:
// namespaces x (team=a) and y (team=b), z without the API's name label.
func cluster() compiler.Input {
	return compiler.Input{
		Namespaces: []*corev1.Namespace{fx.Namespace("x", "team", "a"), fx.Namespace("y", "team", "b"),
			{ObjectMeta: fx.Namespace("z").ObjectMeta}},
		Pods: []*corev1.Pod{
			fx.MakePod("x", "a").Label("app", "a").IPs("10.0.0.1", "fd00::1").Port("http", tcp, 8080).Obj(),
			fx.MakePod("x", "b").Label("app", "b").IPs("10.0.0.2").Port("http", tcp, 9090).Port("dns", udp, 53).Obj(),
			fx.MakePod("y", "a").Label("app", "a").IPs("10.0.1.1").Obj(),
			fx.MakePod("y", "b").Label("app", "b").IPs("10.0.1.2").Port("http", tcp, 7070).Obj(),
			fx.MakePod("y", "host").Label("app", "a").IPs("192.168.0.10").HostNetwork().Obj(),
			fx.MakePod("y", "done").Label("app", "a").IPs("10.0.1.9").Phase(corev1.PodSucceeded).Obj(),
			fx.MakePod("y", "pending").Label("app", "a").Obj(),
		},
	}
}

func TestTranslation(t *testing.T) {
	xa := types.NamespacedName{Namespace: "x", Name: "a"}
	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		opts     compiler.Options
		pod      types.NamespacedName
		ingress  string
		egress   string
		err      error
	}{
		{name: "no policy allows everything", pod: xa, ingress: "allow-all", egress: "allow-all"},
		{name: "selected with default types isolates ingress only",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "deny").Obj()},
			pod:      xa, ingress: "isolated[]", egress: "allow-all"},
		{name: "egress type with no rules denies egress",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "deny").Types(egressOnly...).Obj()},
			pod:      xa, ingress: "allow-all", egress: "isolated[]"},
		{name: "egress rules alone make the default types include egress",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Egress(fx.Peers(fx.BlockPeer("1.2.3.4/32"))).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[1.2.3.4/32any]"},
		{name: "egress rules of an ingress-only policy are ignored",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Types(ingressOnly...).Egress(fx.Peers(fx.BlockPeer("1.2.3.4/32"))).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "allow-all"},
		{name: "pod selector that does not match",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Select("app", "b").Obj()},
			pod:      xa, ingress: "allow-all", egress: "allow-all"},
		{name: "policy of another namespace",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("y", "p").Obj()},
			pod:      xa, ingress: "allow-all", egress: "allow-all"},
		{name: "pod selector peer: matching pods of the policy namespace, every address",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "a")))).Obj()},
			pod:      xa, ingress: "isolated[10.0.0.1/32any fd00::1/128any]", egress: "allow-all"},
		{name: "namespace selector peer: every pod that can be a peer",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.NamespacePeer(fx.Labels("team", "b")))).Obj()},
			pod:      xa, ingress: "isolated[10.0.1.1/32any 10.0.1.2/32any]", egress: "allow-all"},
		{name: "both selectors: intersection",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.PodInNamespacePeer(fx.Labels("team", "b"), fx.Labels("app", "b")))).Obj()},
			pod:      xa, ingress: "isolated[10.0.1.2/32any]", egress: "allow-all"},
		{name: "namespace name label is implied",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("z", "p").Obj(),
				fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.NamespacePeer(fx.Labels("kubernetes.io/metadata.name", "y")))).Obj()},
			pod: xa, ingress: "isolated[10.0.1.1/32any 10.0.1.2/32any]", egress: "allow-all"},
		{name: "empty namespace selector: all namespaces",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.NamespacePeer(fx.Labels()))).Obj()},
			pod:      xa, ingress: "isolated[10.0.0.1/32any 10.0.0.2/32any 10.0.1.1/32any 10.0.1.2/32any fd00::1/128any]", egress: "allow-all"},
		{name: "ipBlock",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("172.16.0.0/12"), fx.BlockPeer("fd10::/64"))).Obj()},
			pod:      xa, ingress: "isolated[172.16.0.0/12any fd10::/64any]", egress: "allow-all"},
		{name: "ipBlock except is subtracted",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.0.0.0/30", "10.0.0.2/32"))).Obj()},
			pod:      xa, ingress: "isolated[10.0.0.0/31any 10.0.0.3/32any]", egress: "allow-all"},
		{name: "numeric ports keep protocols apart",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")),
				fx.Port(tcp, 80), fx.Port(udp, 80), fx.Port(sctp, 80)).Obj()},
			pod: xa, ingress: "isolated[10.9.0.0/16{TCP/80,UDP/80,SCTP/80}]", egress: "allow-all"},
		{name: "default protocol is TCP",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")),
				networkingv1.NetworkPolicyPort{Port: fx.Port(tcp, 443).Port}).Obj()},
			pod: xa, ingress: "isolated[10.9.0.0/16{TCP/443}]", egress: "allow-all"},
		{name: "endPort range",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")), fx.PortRange(udp, 1000, 2000)).Obj()},
			pod:      xa, ingress: "isolated[10.9.0.0/16{UDP/1000-2000}]", egress: "allow-all"},
		{name: "protocol without port: every port of it",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")), fx.AllPorts(sctp)).Obj()},
			pod:      xa, ingress: "isolated[10.9.0.0/16{SCTP/0-65535}]", egress: "allow-all"},
		{name: "ingress named port resolves against the protected pod",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")), fx.NamedPort(tcp, "http")).Obj()},
			pod:      xa, ingress: "isolated[10.9.0.0/16{TCP/8080}]", egress: "allow-all"},
		{name: "ingress named port the pod lacks allows nothing",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.9.0.0/16")), fx.NamedPort(udp, "http")).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "allow-all"},
		{name: "egress named port resolves per destination pod",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Types(egressOnly...).Egress(
				fx.Peers(fx.NamespacePeer(fx.Labels())), fx.NamedPort(tcp, "http")).Obj()},
			pod: xa, ingress: "allow-all", egress: "isolated[10.0.0.1/32{TCP/8080} 10.0.0.2/32{TCP/9090} 10.0.1.2/32{TCP/7070} fd00::1/128{TCP/8080}]"},
		{name: "egress named port with ipBlock: pods inside the block",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Types(egressOnly...).Egress(
				fx.Peers(fx.BlockPeer("10.0.0.0/16", "10.0.1.0/24")), fx.NamedPort(tcp, "http"), fx.Port(tcp, 1)).Obj()},
			pod: xa, ingress: "allow-all", egress: "isolated[10.0.0.0/24{TCP/1} 10.0.0.1/32{TCP/1,TCP/8080} 10.0.0.2/32{TCP/1,TCP/9090} 10.0.2.0/23{TCP/1} 10.0.4.0/22{TCP/1} 10.0.8.0/21{TCP/1} 10.0.16.0/20{TCP/1} 10.0.32.0/19{TCP/1} 10.0.64.0/18{TCP/1} 10.0.128.0/17{TCP/1}]"},
		{name: "egress named port to everyone: every pod with the port",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Types(egressOnly...).Egress(nil, fx.NamedPort(udp, "dns")).Obj()},
			pod:      xa, ingress: "allow-all", egress: "isolated[10.0.0.2/32{UDP/53}]"},
		{name: "empty from: every address on every port",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil).Obj()},
			pod:      xa, ingress: "isolated[0.0.0.0/0any ::/0any]", egress: "allow-all"},
		{name: "ports without peers",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, fx.Port(tcp, 80)).Obj()},
			pod:      xa, ingress: "isolated[0.0.0.0/0{TCP/80} ::/0{TCP/80}]", egress: "allow-all"},
		{name: "union of policies, nested prefixes flattened",
			policies: []*networkingv1.NetworkPolicy{
				fx.MakePolicy("x", "p1").Ingress(fx.Peers(fx.BlockPeer("10.0.0.0/8")), fx.Port(tcp, 80)).Obj(),
				fx.MakePolicy("x", "p2").Select("app", "a").Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "b"))), fx.Port(tcp, 443)).Obj(),
			},
			pod: xa, ingress: "isolated[10.0.0.0/8{TCP/80} 10.0.0.2/32{TCP/80,TCP/443}]", egress: "allow-all"},
		{name: "host peers reach an isolated pod",
			opts:     compiler.Options{HostPeers: []netip.Prefix{netip.MustParsePrefix("192.168.0.10/32")}},
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Obj()},
			pod:      xa, ingress: "isolated[192.168.0.10/32any]", egress: "allow-all"},
		{name: "host peers do not isolate",
			opts: compiler.Options{HostPeers: []netip.Prefix{netip.MustParsePrefix("192.168.0.10/32")}},
			pod:  xa, ingress: "allow-all", egress: "allow-all"},
		{name: "bad cidr: deny-all with error",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.0.0.0/33"))).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrInvalidPolicy},
		{name: "except outside the cidr: deny-all with error",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(fx.Peers(fx.BlockPeer("10.0.0.0/16", "10.1.0.0/24"))).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrInvalidPolicy},
		{name: "endPort with a named port: deny-all with error",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, func() networkingv1.NetworkPolicyPort {
				p := fx.NamedPort(tcp, "http")
				end := int32(90)
				p.EndPort = &end
				return p
			}()).Obj()},
			pod: xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrInvalidPolicy},
		{name: "unknown protocol: deny-all with error",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil, fx.AllPorts("ICMP")).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrInvalidPolicy},
		{name: "broken policy in the namespace that does not select the pod",
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Select("app", "b").Ingress(fx.Peers(fx.BlockPeer("bad"))).Obj()},
			pod:      xa, ingress: "allow-all", egress: "allow-all"},
		{name: "too many entries: deny-all with error",
			opts:     compiler.Options{MaxEntries: 1},
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Ingress(nil).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrCapacity},
		{name: "too many port ranges: deny-all with error",
			opts:     compiler.Options{MaxPortRanges: 1},
			policies: []*networkingv1.NetworkPolicy{fx.MakePolicy("x", "p").Types(egressOnly...).Egress(nil, fx.Port(tcp, 1), fx.Port(tcp, 3)).Obj()},
			pod:      xa, ingress: "isolated[]", egress: "isolated[]", err: compiler.ErrCapacity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := cluster()
			in.NetworkPolicies = tc.policies
			got, ok := compiler.New(in, tc.opts).Pod(tc.pod)
			if !ok {
				t.Fatalf("pod %s not found", tc.pod)
			}
			if !errors.Is(got.Err, tc.err) || (tc.err == nil) != (got.Err == nil) {
				t.Errorf("Err = %v, want %v", got.Err, tc.err)
			}
			if s := got.Ingress.String(); s != tc.ingress {
				t.Errorf("Ingress = %s\n          want %s", s, tc.ingress)
			}
			if s := got.Egress.String(); s != tc.egress {
				t.Errorf("Egress = %s\n         want %s", s, tc.egress)
			}
		})
	}
}

func TestPoliciesReported(t *testing.T) {
	in := cluster()
	in.NetworkPolicies = []*networkingv1.NetworkPolicy{
		fx.MakePolicy("x", "b-only").Select("app", "b").Obj(),
		fx.MakePolicy("x", "all").Obj(),
		fx.MakePolicy("x", "a-only").Select("app", "a").Obj(),
	}
	all := compiler.New(in, compiler.Options{}).All()
	if len(all) != len(in.Pods) {
		t.Fatalf("All() returned %d pods, want %d", len(all), len(in.Pods))
	}
	got := all[0] // x/a sorts first
	if got.Pod.String() != "x/a" || len(got.Policies) != 2 || got.Policies[0] != "x/a-only" || got.Policies[1] != "x/all" {
		t.Fatalf("first result = %s %v, want x/a [x/a-only x/all]", got.Pod, got.Policies)
	}
}

func TestFrontends(t *testing.T) {
	headless := fx.Service("x", "headless", "None")
	lb := fx.Service("x", "lb", "10.96.0.2", "fd96::2")
	lb.Spec.ExternalIPs = []string{"203.0.113.1"}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.2"}, {Hostname: "lb.example"}}
	ext := fx.Service("x", "ext")
	ext.Spec.Type = corev1.ServiceTypeExternalName
	got := compiler.Frontends([]*corev1.Service{headless, lb, ext, fx.Service("y", "dup", "10.96.0.2")})
	want := []string{"10.96.0.2/32", "203.0.113.1/32", "203.0.113.2/32", "fd96::2/128"}
	if len(got) != len(want) {
		t.Fatalf("Frontends() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("Frontends() = %v, want %v", got, want)
		}
	}
}

// TestIngressNamedPortsPerPod: pods selected by the same policy share its
// compiled result, except that an ingress named port resolves against each
// pod's own containers.
func TestIngressNamedPortsPerPod(t *testing.T) {
	in := compiler.Input{Pods: []*corev1.Pod{
		fx.MakePod("x", "a").Label("app", "web").IPs("10.0.0.1").Port("http", tcp, 8080).Obj(),
		fx.MakePod("x", "b").Label("app", "web").IPs("10.0.0.2").Port("http", tcp, 9090).Obj(),
		fx.MakePod("x", "c").Label("app", "web").IPs("10.0.0.3").Obj(),
	}, NetworkPolicies: []*networkingv1.NetworkPolicy{
		fx.MakePolicy("x", "p").Select("app", "web").Ingress(nil, fx.NamedPort(tcp, "http")).Obj(),
	}}
	want := map[string]string{
		"x/a": "isolated[0.0.0.0/0{TCP/8080} ::/0{TCP/8080}]",
		"x/b": "isolated[0.0.0.0/0{TCP/9090} ::/0{TCP/9090}]",
		"x/c": "isolated[]",
	}
	for _, r := range compiler.New(in, compiler.Options{}).All() {
		if got := r.Ingress.String(); got != want[r.Pod.String()] {
			t.Errorf("%s ingress = %s, want %s", r.Pod, got, want[r.Pod.String()])
		}
	}
}
