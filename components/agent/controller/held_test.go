package controller

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

func TestHoldRules(t *testing.T) {
	hostPeers := []netip.Prefix{netip.MustParsePrefix("10.244.1.1/32")}
	node := nodeOnly(hostPeers)
	web := ruleSetOf("10.0.0.0/24")
	dns := ruleSetOf("10.96.0.10/32")
	pod := func(in, eg rules.RuleSet) compiler.PodRules { return compiler.PodRules{Ingress: in, Egress: eg} }
	for _, tc := range []struct {
		name    string
		pending []compiler.PodRules
		wantIn  rules.RuleSet
		wantEg  rules.RuleSet
	}{
		{"no pod waits for an address: open", nil, rules.AllowAll, rules.AllowAll},
		{"one pod no policy selects: open", []compiler.PodRules{pod(rules.AllowAll, rules.AllowAll)}, rules.AllowAll, rules.AllowAll},
		{"one isolated pod: its own rules", []compiler.PodRules{pod(web, dns)}, web, dns},
		{"replicas with the same rules: those", []compiler.PodRules{pod(web, dns), pod(web, dns)}, web, dns},
		{"ingress differs: node only in, agreed egress", []compiler.PodRules{pod(web, dns), pod(rules.AllowAll, dns)}, node, dns},
		{"egress differs: agreed ingress, deny out", []compiler.PodRules{pod(web, rules.AllowAll), pod(web, dns)}, web, rules.DenyAll},
		{"both differ", []compiler.PodRules{pod(web, dns), pod(rules.AllowAll, rules.AllowAll)}, node, rules.DenyAll},
		{"a deny-all pod among others", []compiler.PodRules{pod(rules.DenyAll, rules.DenyAll), pod(web, dns)}, node, rules.DenyAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, eg := holdRules(tc.pending, hostPeers)
			if !in.Equal(tc.wantIn) || !eg.Equal(tc.wantEg) {
				t.Errorf("holdRules = %s, %s; want %s, %s", in, eg, tc.wantIn, tc.wantEg)
			}
		})
	}
}

func ruleSetOf(prefixes ...string) rules.RuleSet {
	var b rules.Builder
	for _, p := range prefixes {
		b.Add(netip.MustParsePrefix(p), rules.AnyPort)
	}
	return b.Build(true)
}

// unknownIf is a pod interface of the node that no pod's address names.
const unknownIf = 12

// hostWithNewPod is host with one more pod veth, routed to 10.244.1.20;
// x/a's interface 7 is a pod interface too (host's interface 9 is not).
func hostWithNewPod() hostnet.State {
	st := hostnet.State{Routes: map[netip.Addr]int{}, Addrs: host.Addrs, PodInterfaces: map[int]bool{7: true, unknownIf: true}}
	for a, i := range host.Routes {
		st.Routes[a] = i
	}
	st.Routes[netip.MustParseAddr("10.244.1.20")] = unknownIf
	return st
}

// pendingPod is bound to the node and has no address yet.
func pendingPod(name, app string) *fx.PodBuilder {
	b := fx.MakePod("x", name).Label("app", app)
	b.Obj().Spec.NodeName = node
	b.Obj().Status.Phase = "Pending"
	return b
}

func TestReconcileHoldsInterfacesOfPendingPods(t *testing.T) {
	isolated := fx.MakePolicy("x", "isolate-new").Select("app", "new").
		Types(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
		Egress(fx.Peers(fx.PodPeer(fx.Labels("app", "a")))).Obj()
	wantEgress := ruleSetOf("10.244.1.5/32")
	for _, tc := range []struct {
		name     string
		pending  []string // app labels of pods without an address
		wantHeld bool
		wantIn   rules.RuleSet
		wantEg   rules.RuleSet
	}{
		{name: "no pod waits: the interface is left alone"},
		{name: "the pod that waits is not isolated: left alone", pending: []string{"other"}},
		{name: "the isolated pod waits: its own rules", pending: []string{"new"}, wantHeld: true,
			wantIn: nodeOnly(host.HostPeers()), wantEg: wantEgress},
		{name: "an isolated and an open pod wait: deny but the node", pending: []string{"new", "other"}, wantHeld: true,
			wantIn: nodeOnly(host.HostPeers()), wantEg: rules.DenyAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{fx.Namespace("x"), localPod("a", "10.244.1.5"), isolated}
			for i, app := range tc.pending {
				objs = append(objs, pendingPod("pending-"+strconv.Itoa(i), app).Obj())
			}
			h := newHarness(t, objs...)
			h.c.deps.ReadHost = func() (hostnet.State, error) { return hostWithNewPod(), nil }
			if err := h.c.syncOnce(); err != nil {
				t.Fatal(err)
			}
			if len(h.enforcer.pods) != 1 || h.enforcer.pods[0].Endpoint.Ifindex != 7 {
				t.Fatalf("judged pods %+v, want x/a on 7", h.enforcer.pods)
			}
			held := h.enforcer.held
			if !tc.wantHeld {
				if len(held) != 0 {
					t.Fatalf("held %+v, want none", held)
				}
				return
			}
			if len(held) != 1 || held[0].Endpoint.Ifindex != unknownIf ||
				!slices.Equal(held[0].Endpoint.Addrs, []netip.Addr{netip.MustParseAddr("10.244.1.20")}) {
				t.Fatalf("held %+v, want interface %d with 10.244.1.20", held, unknownIf)
			}
			if !held[0].Ingress.Equal(tc.wantIn) || !held[0].Egress.Equal(tc.wantEg) {
				t.Errorf("held rules %s, %s; want %s, %s", held[0].Ingress, held[0].Egress, tc.wantIn, tc.wantEg)
			}
			if got := testutil.ToFloat64(h.metrics.InterfacesHeld); got != 1 {
				t.Errorf("interfaces_held = %v, want 1", got)
			}
			if got := testutil.ToFloat64(h.metrics.InterfaceHolds); got != 1 {
				t.Errorf("interface_holds_total = %v, want 1", got)
			}
		})
	}
}

func TestHeldInterfaceGoesToItsPodOnceItsAddressIsKnown(t *testing.T) {
	isolated := fx.MakePolicy("x", "isolate-new").Select("app", "new").Obj()
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"), isolated, pendingPod("new", "new").Obj())
	h.c.deps.ReadHost = func() (hostnet.State, error) { return hostWithNewPod(), nil }
	if err := h.c.syncOnce(); err != nil {
		t.Fatal(err)
	}
	if len(h.enforcer.held) != 1 {
		t.Fatalf("held %+v, want the new interface", h.enforcer.held)
	}
	ctx := context.Background()
	p, err := h.client.CoreV1().Pods("x").Get(ctx, "new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP, p.Status.PodIPs = "10.244.1.20", nil
	if _, err := h.client.CoreV1().Pods("x").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { p, _ := h.c.pods.Pods("x").Get("new"); return p != nil && p.Status.PodIP != "" })
	if err := h.c.syncOnce(); err != nil {
		t.Fatal(err)
	}
	if len(h.enforcer.held) != 0 {
		t.Errorf("held %+v after the pod's address is known, want none", h.enforcer.held)
	}
	var onNew []types.NamespacedName
	for _, p := range h.enforcer.pods {
		if p.Endpoint.Ifindex == unknownIf {
			onNew = append(onNew, p.Key)
		}
	}
	if len(onNew) != 1 || onNew[0].Name != "new" {
		t.Errorf("pods on interface %d: %v, want x/new", unknownIf, onNew)
	}
	if got := testutil.ToFloat64(h.metrics.InterfacesHeld); got != 0 {
		t.Errorf("interfaces_held = %v, want 0", got)
	}
}

func TestNewInterfacesAreHeldBeforeInformersSync(t *testing.T) {
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"))
	var synced atomic.Bool
	h.c.hasSynced = []cache.InformerSynced{synced.Load}
	var current atomic.Value
	var reads atomic.Int32
	start := hostWithNewPod()
	delete(start.PodInterfaces, unknownIf)
	current.Store(start)
	h.c.deps.ReadHost = func() (hostnet.State, error) { reads.Add(1); return current.Load().(hostnet.State), nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.c.Run(ctx)
	waitFor(t, func() bool { return reads.Load() > 0 }) // the agent has seen the node as it started

	current.Store(hostWithNewPod()) // a pod's veth appears
	h.c.Notify()
	heldOnce := func() []enforcer.Held {
		h.enforcer.mu.Lock()
		defer h.enforcer.mu.Unlock()
		for _, held := range h.enforcer.holds {
			if len(held) > 0 {
				return held
			}
		}
		return nil
	}
	waitFor(t, func() bool { return heldOnce() != nil })
	held := heldOnce()
	if len(held) != 1 || held[0].Endpoint.Ifindex != unknownIf {
		t.Fatalf("held before sync %+v, want only the new interface %d (7 was there at start)", held, unknownIf)
	}
	if !held[0].Ingress.Equal(nodeOnly(host.HostPeers())) || !held[0].Egress.Equal(rules.DenyAll) {
		t.Errorf("held rules %s, %s; want the node only in, nothing out", held[0].Ingress, held[0].Egress)
	}
	h.enforcer.mu.Lock()
	calls := h.enforcer.calls
	h.enforcer.mu.Unlock()
	if calls != 0 {
		t.Fatalf("Sync ran %d times before the informers synced: it would have removed every pod", calls)
	}
	synced.Store(true)
	waitFor(t, func() bool { return h.c.Ready() == nil })
	h.enforcer.mu.Lock()
	defer h.enforcer.mu.Unlock()
	if len(h.enforcer.held) != 0 {
		t.Errorf("after sync, with no pod waiting, held %+v, want the interface released", h.enforcer.held)
	}
}
