package controller

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
)

// BenchmarkReconcile measures the agent's own share of a policy change on
// one node: the snapshot from the informers, compiling the node's pods and
// the bookkeeping of the outcomes, for 200 pods (half of them local) in 10
// namespaces and 100 policies. The enforcer is a stand-in; the dataplane's
// share is measured by BenchmarkApply in the dataplane package.
func BenchmarkReconcile(b *testing.B) {
	objs := []runtime.Object{}
	routes := map[netip.Addr]int{}
	for n := range 10 {
		objs = append(objs, fx.Namespace(fmt.Sprintf("ns-%d", n), "bench", "agent"))
	}
	for i := range 200 {
		ip := fmt.Sprintf("10.244.%d.%d", i%2, 2+i/2)
		p := fx.MakePod(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("p-%d", i)).Label("group", strconv.Itoa(i/10%4)).
			IPs(ip).Port("http", corev1.ProtocolTCP, 8080).Obj()
		if i%2 == 0 {
			p.Spec.NodeName = node
			routes[netip.MustParseAddr(ip)] = 100 + i
		} else {
			p.Spec.NodeName = "worker-2"
		}
		objs = append(objs, p)
	}
	for i := range 100 {
		objs = append(objs, fx.MakePolicy(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("np-%d", i)).
			Select("group", strconv.Itoa(i/10%4)).
			Types(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			Ingress(fx.Peers(fx.PodInNamespacePeer(fx.Labels("bench", "agent"), fx.Labels("group", strconv.Itoa((i+1)%4)))),
				fx.NamedPort(corev1.ProtocolTCP, "http"), fx.PortRange(corev1.ProtocolTCP, 80, 90)).
			Egress(fx.Peers(fx.NamespacePeer(fx.Labels("bench", "agent")))).Obj())
	}
	h := newHarness(b, objs...)
	h.c.deps.ReadHost = func() (hostnet.State, error) {
		return hostnet.State{Routes: routes, Addrs: host.Addrs}, nil
	}
	b.ResetTimer()
	for b.Loop() {
		if err := h.c.syncOnce(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := len(h.enforcer.pods); n != 100 {
		b.Fatalf("reconciled %d local pods, want 100", n)
	}
}
