package controller

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
)

const node = "worker-1"

// fakeEnforcer records the last Sync and Hold and reports every pod as
// changed.
type fakeEnforcer struct {
	mu        sync.Mutex
	calls     int
	pods      []enforcer.Pod
	compiled  map[types.NamespacedName]compiler.PodRules
	held      []enforcer.Held
	frontends []netip.Prefix
	holds     [][]enforcer.Held // every Hold call
	fail      error             // returned by the next Sync, then cleared
}

func (f *fakeEnforcer) Hold(held []enforcer.Held) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holds = append(f.holds, held)
	return nil
}

func (f *fakeEnforcer) Sync(pods []enforcer.Pod, compiled map[types.NamespacedName]compiler.PodRules, held []enforcer.Held, frontends []netip.Prefix) ([]enforcer.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.pods, f.compiled, f.held, f.frontends = pods, compiled, held, frontends
	if err := f.fail; err != nil {
		f.fail = nil
		return nil, err
	}
	var out []enforcer.Outcome
	for _, p := range pods {
		r := compiled[p.Key]
		out = append(out, enforcer.Outcome{Pod: p.Key, Policies: r.Policies, Changed: true, DenyAll: r.Err != nil, Err: r.Err,
			Entries: len(r.Ingress.Entries) + len(r.Egress.Entries)})
	}
	return out, nil
}

func (f *fakeEnforcer) rules(ns, name string) (compiler.PodRules, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.compiled[types.NamespacedName{Namespace: ns, Name: name}]
	return r, ok
}

var host = hostnet.State{
	Routes: map[netip.Addr]int{netip.MustParseAddr("10.244.1.5"): 7, netip.MustParseAddr("10.244.1.8"): 9},
	Addrs:  []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("172.18.0.3")},
}

type harness struct {
	c        *Controller
	client   *fake.Clientset
	enforcer *fakeEnforcer
	recorder *record.FakeRecorder
	metrics  *Metrics
	factory  informers.SharedInformerFactory
}

func newHarness(t testing.TB, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{client: fake.NewClientset(objs...), enforcer: &fakeEnforcer{},
		recorder: record.NewFakeRecorder(10), metrics: NewMetrics(prometheus.NewRegistry())}
	h.factory = informers.NewSharedInformerFactory(h.client, 0)
	var err error
	h.c, err = New(Config{NodeName: node, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, RetryDelay: 20 * time.Millisecond},
		Deps{Informers: h.factory, Enforcer: h.enforcer, ReadHost: func() (hostnet.State, error) { return host, nil },
			Recorder: h.recorder, Metrics: h.metrics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())
	return h
}

func localPod(name, ip string) *corev1.Pod {
	p := fx.MakePod("x", name).Label("app", name).IPs(ip).Obj()
	p.Spec.NodeName = node
	return p
}

func TestReconcilePicksLocalPodsWithInterfaces(t *testing.T) {
	remote := fx.MakePod("x", "remote").Label("app", "remote").IPs("10.244.2.5").Obj()
	remote.Spec.NodeName = "worker-2"
	hostNet := localPod("hostnet", "172.18.0.3")
	hostNet.Spec.HostNetwork = true
	done := fx.MakePod("x", "done").IPs("10.244.1.8").Phase(corev1.PodSucceeded).Obj()
	done.Spec.NodeName = node
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "s"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.7.7", ClusterIPs: []string{"10.96.7.7"}}}
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"), localPod("unrouted", "10.244.1.6"), remote, hostNet, done, svc,
		fx.MakePolicy("x", "deny").Obj())

	if err := h.c.syncOnce(); err != nil {
		t.Fatal(err)
	}
	want := []enforcer.Pod{{Key: types.NamespacedName{Namespace: "x", Name: "a"}}}
	if len(h.enforcer.pods) != 1 || h.enforcer.pods[0].Key != want[0].Key || h.enforcer.pods[0].Endpoint.Ifindex != 7 ||
		!slices.Equal(h.enforcer.pods[0].Endpoint.Addrs, []netip.Addr{netip.MustParseAddr("10.244.1.5")}) {
		t.Fatalf("Sync pods = %+v, want only x/a on interface 7 with 10.244.1.5", h.enforcer.pods)
	}
	r, _ := h.enforcer.rules("x", "a")
	var got []string
	for _, e := range r.Ingress.Entries {
		got = append(got, e.Prefix.String())
	}
	if !r.Ingress.Isolated || !slices.Equal(got, []string{"10.244.1.1/32", "172.18.0.3/32"}) {
		t.Errorf("ingress of x/a under default deny: isolated=%v entries %v, want isolated with only the node's addresses", r.Ingress.Isolated, got)
	}
	if !slices.Contains(h.enforcer.frontends, netip.MustParsePrefix("10.96.7.7/32")) || !slices.Contains(h.enforcer.frontends, netip.MustParsePrefix("10.96.0.0/16")) {
		t.Errorf("frontends = %v, want the ClusterIP and the service CIDR", h.enforcer.frontends)
	}
	if got := testutil.ToFloat64(h.metrics.PodsManaged); got != 1 {
		t.Errorf("pods_managed = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.metrics.PodsWaiting); got != 1 {
		t.Errorf("pods_without_interface = %v, want 1 (x/unrouted)", got)
	}
	if err := h.c.Ready(); err != nil {
		t.Errorf("Ready after a successful reconcile: %v", err)
	}
}

func TestReusedInterfaceBelongsToNewerPod(t *testing.T) {
	old := localPod("old", "10.244.1.5")
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	newer := localPod("new", "10.244.1.5")
	newer.CreationTimestamp = metav1.NewTime(time.Now())
	h := newHarness(t, fx.Namespace("x"), old, newer)
	if err := h.c.syncOnce(); err != nil {
		t.Fatal(err)
	}
	if len(h.enforcer.pods) != 1 || h.enforcer.pods[0].Key.Name != "new" {
		t.Errorf("Sync pods = %+v, want only x/new on the shared interface", h.enforcer.pods)
	}
}

func TestDenyAllFallbackRecordsOneEvent(t *testing.T) {
	bad := fx.MakePolicy("x", "bad").Ingress(fx.Peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "not-a-cidr"}})).Obj()
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"), bad)
	for range 2 {
		if err := h.c.syncOnce(); err != nil {
			t.Fatalf("a policy error is not a reconcile error: %v", err)
		}
	}
	if got := testutil.ToFloat64(h.metrics.DenyAllFallbacks); got != 1 {
		t.Errorf("deny_all_fallbacks_total = %v, want 1 over two reconciles", got)
	}
	if got := testutil.ToFloat64(h.metrics.PodsDenyAll); got != 1 {
		t.Errorf("pods_deny_all = %v, want 1", got)
	}
	select {
	case e := <-h.recorder.Events:
		if !strings.HasPrefix(e, "Warning "+ReasonDenyAll+" ") || !strings.Contains(e, "not-a-cidr") {
			t.Errorf("event %q, want a Warning %s naming the bad CIDR", e, ReasonDenyAll)
		}
	default:
		t.Fatal("no Event for the pod that falls back to deny-all")
	}
	select {
	case e := <-h.recorder.Events:
		t.Errorf("second event %q: the same fallback must be reported once", e)
	default:
	}

	if err := h.client.NetworkingV1().NetworkPolicies("x").Delete(context.Background(), "bad", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := h.c.policies.NetworkPolicies("x").Get("bad"); return err != nil })
	if err := h.c.syncOnce(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.metrics.PodsDenyAll); got != 0 {
		t.Errorf("pods_deny_all after the policy is gone = %v, want 0", got)
	}
}

func TestRunEnforcesChangesAndMeasuresPropagation(t *testing.T) {
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- h.c.Run(ctx) }()
	waitFor(t, func() bool { return h.c.Ready() == nil })
	if r, _ := h.enforcer.rules("x", "a"); r.Ingress.Isolated {
		t.Fatal("x/a isolated before any policy")
	}

	np := fx.MakePolicy("x", "deny").Select("app", "a").Obj()
	if _, err := h.client.NetworkingV1().NetworkPolicies("x").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { r, _ := h.enforcer.rules("x", "a"); return r.Ingress.Isolated })
	waitFor(t, func() bool { return testutil.CollectAndCount(h.metrics.Propagation) == 1 })
	if got := testutil.ToFloat64(h.metrics.PolicyChanges.WithLabelValues("add")); got != 1 {
		t.Errorf("policy_changes_total{event=add} = %v, want 1", got)
	}

	// Relabelling the pod out of the policy's selector lifts the isolation.
	pod, _ := h.client.CoreV1().Pods("x").Get(ctx, "a", metav1.GetOptions{})
	pod.Labels["app"] = "other"
	if _, err := h.client.CoreV1().Pods("x").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { r, _ := h.enforcer.rules("x", "a"); return !r.Ingress.Isolated })
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestFailedReconcileIsRetried(t *testing.T) {
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"))
	h.enforcer.fail = errors.New("map full")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.c.Run(ctx)
	waitFor(t, func() bool { return h.c.Ready() == nil })
	if got := testutil.ToFloat64(h.metrics.ReconcileErrors); got != 1 {
		t.Errorf("reconcile_errors_total = %v, want 1", got)
	}
	h.enforcer.mu.Lock()
	calls := h.enforcer.calls
	h.enforcer.mu.Unlock()
	if calls != 2 {
		t.Errorf("Sync calls = %d, want 2 (the failure, then the retry)", calls)
	}
}

func TestReadHostFailureKeepsDataplane(t *testing.T) {
	h := newHarness(t, fx.Namespace("x"), localPod("a", "10.244.1.5"))
	h.c.deps.ReadHost = func() (hostnet.State, error) { return hostnet.State{}, errors.New("netlink: boom") }
	if err := h.c.syncOnce(); err == nil {
		t.Fatal("reconcile without routes succeeded")
	}
	if h.enforcer.calls != 0 {
		t.Error("Sync ran without knowing the interfaces: it would have removed every pod")
	}
	if h.c.Ready() == nil {
		t.Error("Ready before any successful reconcile")
	}
}

func TestPodChanged(t *testing.T) {
	base := localPod("a", "10.244.1.5")
	for _, tc := range []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   bool
	}{
		{"status condition only", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		}, false},
		{"annotation only", func(p *corev1.Pod) { p.Annotations = map[string]string{"k": "v"} }, false},
		{"label", func(p *corev1.Pod) { p.Labels["app"] = "b" }, true},
		{"address", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.9"}} }, true},
		{"phase", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true},
		{"named port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.mutate(n)
			if got := podChanged(base, n); got != tc.want {
				t.Errorf("podChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
