package compiler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
)

// BenchmarkCompile compiles every pod of a cluster with 5,000 pods in 50
// namespaces and 500 policies (10 per namespace) that use every feature:
// default deny, pod, namespace and combined selectors, ipBlocks with except,
// numeric, named and ranged ports, TCP, UDP and SCTP.
func BenchmarkCompile(b *testing.B) {
	in := syntheticCluster(50, 100)
	var entries int
	for b.Loop() {
		entries = 0
		for _, r := range compiler.New(in, compiler.Options{}).All() {
			if r.Err != nil {
				b.Fatalf("%s: %v", r.Pod, r.Err)
			}
			entries += len(r.Ingress.Entries) + len(r.Egress.Entries)
		}
	}
	b.ReportMetric(float64(len(in.Pods)), "pods")
	b.ReportMetric(float64(len(in.NetworkPolicies)), "policies")
	b.ReportMetric(float64(entries), "entries")
}

func syntheticCluster(namespaces, podsPerNamespace int) compiler.Input {
	var in compiler.Input
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	tiers := []string{"web", "api", "db"}
	for n := range namespaces {
		ns := fmt.Sprintf("ns%02d", n)
		env := "dev"
		if n%2 == 0 {
			env = "prod"
		}
		in.Namespaces = append(in.Namespaces, fx.Namespace(ns, "team", fmt.Sprintf("t%d", n%5), "env", env))
		for i := range podsPerNamespace {
			p := fx.MakePod(ns, fmt.Sprintf("pod%03d", i)).
				Label("app", fmt.Sprintf("app%d", i%10)).Label("tier", tiers[i%3]).
				Port("http", tcp, 8080).Port("metrics", tcp, 9090)
			if i%10 == 0 {
				p.Port("dns", udp, 53)
			}
			v4 := fmt.Sprintf("10.%d.%d.%d", 64+n, i/250, i%250+1)
			if i%2 == 0 {
				p.IPs(v4, fmt.Sprintf("fd00:%x::%x", n, i+1))
			} else {
				p.IPs(v4)
			}
			in.Pods = append(in.Pods, p.Obj())
		}
		egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		app := func(i int) string { return fmt.Sprintf("app%d", (n+i)%10) }
		in.NetworkPolicies = append(in.NetworkPolicies,
			fx.MakePolicy(ns, "default-deny").Types(both...).Obj(),
			fx.MakePolicy(ns, "app-to-app").Select("app", app(1)).
				Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", app(2)))), fx.Port(tcp, 8080)).Obj(),
			fx.MakePolicy(ns, "web-from-teams").Select("tier", "web").
				Ingress(fx.Peers(fx.PodInNamespacePeer(fx.Labels("team", fmt.Sprintf("t%d", (n+1)%5)), fx.Labels("tier", "web"))), fx.Port(tcp, 80), fx.Port(tcp, 443)).Obj(),
			fx.MakePolicy(ns, "dns").Types(egress...).
				Egress(fx.Peers(fx.NamespacePeer(fx.Labels("kubernetes.io/metadata.name", "ns00"))), fx.NamedPort(udp, "dns"), fx.Port(tcp, 53)).Obj(),
			fx.MakePolicy(ns, "internet").Select("tier", "api").Types(egress...).
				Egress(fx.Peers(fx.BlockPeer("0.0.0.0/0", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")), fx.Port(tcp, 443)).Obj(),
			fx.MakePolicy(ns, "metrics-from-prod").
				Ingress(fx.Peers(fx.NamespacePeer(fx.Labels("env", "prod"))), fx.NamedPort(tcp, "metrics")).Obj(),
			fx.MakePolicy(ns, "nodeports").Select("app", app(3)).
				Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", app(4)))), fx.PortRange(udp, 30000, 32767)).Obj(),
			fx.MakePolicy(ns, "to-db").Select("tier", "api").Types(egress...).
				Egress(fx.Peers(fx.PodPeer(fx.Labels("tier", "db"))), fx.Port(tcp, 5432), fx.Port(sctp, 3868)).Obj(),
			fx.MakePolicy(ns, "from-office").Select("tier", "web").
				Ingress(fx.Peers(fx.BlockPeer("192.168.0.0/16", "192.168.13.0/24")), fx.NamedPort(tcp, "http")).Obj(),
			fx.MakePolicy(ns, "same-namespace").Types(egress...).
				Egress(fx.Peers(fx.PodPeer(fx.Labels()))).Obj(),
		)
	}
	return in
}
