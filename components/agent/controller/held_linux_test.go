package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
)

// nsEnforcer runs the enforcer inside the node's namespace, where the
// agent's thread would be.
type nsEnforcer struct {
	ns *netns.NS
	e  *enforcer.Enforcer
}

func (n nsEnforcer) Sync(pods []enforcer.Pod, compiled map[types.NamespacedName]compiler.PodRules, held []enforcer.Held, frontends []netip.Prefix) (out []enforcer.Outcome, err error) {
	n.ns.Do(func() error { out, err = n.e.Sync(pods, compiled, held, frontends); return nil })
	return out, err
}

func (n nsEnforcer) Hold(held []enforcer.Held) (err error) {
	n.ns.Do(func() error { err = n.e.Hold(held); return nil })
	return err
}

// kernelAgent is a controller on a node namespace with the real dataplane,
// the node's routes read and watched through netlink, and a fake API.
type kernelAgent struct {
	c       *Controller
	dp      *dataplane.Dataplane
	metrics *Metrics
	stop    func()
	seen    sync.Map // ifindex → *atomic.Int32: readings of the node that showed it
}

// reads returns how many readings of the node showed ifindex as a pod
// interface.
func (a *kernelAgent) reads(ifindex int) int32 {
	if n, ok := a.seen.Load(ifindex); ok {
		return n.(*atomic.Int32).Load()
	}
	return 0
}

// startKernelAgent opens the dataplane pinned at pin and runs a controller
// for it. synced, when not nil, stands in for the informers' sync.
func startKernelAgent(t *testing.T, node *netns.Node, pin string, client *fake.Clientset, synced func() bool) *kernelAgent {
	t.Helper()
	var dp *dataplane.Dataplane
	if err := node.NS.Do(func() (err error) {
		dp, err = dataplane.Open(dataplane.Config{PinPath: pin})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a := &kernelAgent{dp: dp, metrics: NewMetrics(prometheus.NewRegistry())}
	factory := informers.NewSharedInformerFactory(client, 0)
	readHost := func() (st hostnet.State, err error) {
		node.NS.Do(func() error { st, err = hostnet.Read(); return nil })
		for ifindex := range st.PodInterfaces {
			n, _ := a.seen.LoadOrStore(ifindex, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
		return st, err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := New(Config{NodeName: node0, Resync: time.Hour, RetryDelay: 50 * time.Millisecond},
		Deps{Informers: factory, Enforcer: nsEnforcer{node.NS, enforcer.New(dp)}, ReadHost: readHost, Metrics: a.metrics, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if synced != nil {
		c.hasSynced = append(c.hasSynced, synced)
	}
	a.c = c
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 1)
	if err := node.NS.Do(func() error { return hostnet.Subscribe(changed, ctx.Done()) }); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				c.Notify()
			}
		}
	}()
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once atomic.Bool
	a.stop = func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
		dp.Close() // pins stay: the last rules keep being enforced
	}
	t.Cleanup(a.stop)
	return a
}

// within polls cond for up to d and reports whether it came true.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// managed reports whether the dataplane enforces ifindex.
func (a *kernelAgent) managed(ifindex int) bool {
	ifs, _ := a.dp.Endpoints()
	return slices.Contains(ifs, ifindex)
}

const node0 = "node-0"

// heldEnv is a node with a server pod, another pod, and a pod "new" bound
// to the node without an address yet.
type heldEnv struct {
	node          *netns.Node
	server, other *netns.Pod
	client        *fake.Clientset
	pin           string
}

func newHeldEnv(t *testing.T, policies ...*networkingv1.NetworkPolicy) *heldEnv {
	t.Helper()
	if err := features.HaveProgramType(ebpf.Netfilter); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks netfilter BPF programs: %v", err)
	}
	e := &heldEnv{node: netns.NewNode(t, 2)}
	e.server, e.other = e.node.Pods[0], e.node.Pods[1]
	objs := []runtime.Object{fx.Namespace("x")}
	for _, p := range []struct {
		app string
		pod *netns.Pod
	}{{"server", e.server}, {"other", e.other}} {
		serve(t, p.pod)
		o := fx.MakePod("x", p.app).Label("app", p.app).IPs(p.pod.V4.String(), p.pod.V6.String()).Obj()
		o.Spec.NodeName = node0
		objs = append(objs, o)
	}
	pending := fx.MakePod("x", "new").Label("app", "new").Phase(corev1.PodPending).Obj()
	pending.Spec.NodeName = node0
	objs = append(objs, pending)
	for _, np := range policies {
		objs = append(objs, np)
	}
	e.client = fake.NewClientset(objs...)
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	e.pin = dir + "/xg"
	return e
}

// isolateNew lets x/new talk to the server only, both ways, on TCP 8080.
func isolateNew() *networkingv1.NetworkPolicy {
	return fx.MakePolicy("x", "new").Select("app", "new").
		Types(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
		Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "server"))), fx.Port(corev1.ProtocolTCP, 8080)).
		Egress(fx.Peers(fx.PodPeer(fx.Labels("app", "server"))), fx.Port(corev1.ProtocolTCP, 8080)).Obj()
}

// postAddress is the kubelet posting x/new's address.
func (e *heldEnv) postAddress(t *testing.T, p *netns.Pod) {
	t.Helper()
	ctx := context.Background()
	o, err := e.client.CoreV1().Pods("x").Get(ctx, "new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.Status.Phase = corev1.PodRunning
	o.Status.PodIP, o.Status.PodIPs = p.V4.String(), []corev1.PodIP{{IP: p.V4.String()}, {IP: p.V6.String()}}
	if _, err := e.client.CoreV1().Pods("x").UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serve answers TCP on 8080 inside the pod.
func serve(t *testing.T, p *netns.Pod) {
	t.Helper()
	if err := p.NS.Do(func() error {
		l, err := net.Listen("tcp", ":8080")
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "hello")
				c.Close()
			}
		}()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// reaches reports whether a TCP connection from ns to addr:8080 is answered.
func reaches(ns *netns.NS, to netip.Addr) bool {
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(to, 8080).String(), 300*time.Millisecond)
		return err
	}); err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 6)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "hello\n"
}

// checkNewPod checks the new pod's traffic against x/new's policy.
func (e *heldEnv) checkNewPod(t *testing.T, stage string, p *netns.Pod) {
	t.Helper()
	for _, c := range []struct {
		what string
		from *netns.NS
		to   netip.Addr
		want bool
	}{
		{"new pod → a destination its egress denies", p.NS, e.other.V4, false},
		{"new pod → a destination its egress denies (IPv6)", p.NS, e.other.V6, false},
		{"a peer its ingress does not admit → new pod", e.other.NS, p.V4, false},
		{"new pod → the server its egress admits", p.NS, e.server.V4, true},
		{"the server its ingress admits → new pod", e.server.NS, p.V4, true},
		{"the node (kubelet probes) → new pod", e.node.NS, p.V4, true},
	} {
		if got := reaches(c.from, c.to); got != c.want {
			t.Errorf("%s: %s: reached = %v, want %v", stage, c.what, got, c.want)
		}
	}
}

// TestNewPodInterfaceDeniedFromItsFirstPacket brings a pod's veth up the
// way the CNI plugin does, while the API has the pod bound to the node but
// no address for it, and checks that the pod's policy holds from the first
// packet the pod sends, and still once its address arrives.
func TestNewPodInterfaceDeniedFromItsFirstPacket(t *testing.T) {
	e := newHeldEnv(t, isolateNew())
	a := startKernelAgent(t, e.node, e.pin, e.client, nil)
	waitFor(t, func() bool { return a.c.Ready() == nil })

	p := e.node.AddPodWithoutRoutes(t) // the sandbox's network comes up
	routing := time.Now()
	e.node.RoutePod(t, p) // host routes last
	routed := time.Since(routing)
	if within(2*time.Second, func() bool { return a.managed(p.Ifindex) }) {
		t.Logf("interface held %s after the CNI set-up began adding its host routes (adding them took %s)",
			time.Since(routing).Round(100*time.Microsecond), routed.Round(100*time.Microsecond))
	} else {
		t.Error("the new pod's interface was not held within 2s of its host routes")
	}
	serve(t, p) // the containers start
	e.checkNewPod(t, "held, before the address is known", p)
	if got := testutil.ToFloat64(a.metrics.InterfacesHeld); got != 1 {
		t.Errorf("interfaces_held = %v, want 1", got)
	}

	e.postAddress(t, p)
	waitFor(t, func() bool {
		return testutil.ToFloat64(a.metrics.InterfacesHeld) == 0 && testutil.ToFloat64(a.metrics.PodsManaged) == 3
	})
	e.checkNewPod(t, "with its own rules", p)
}

// TestInterfaceOfPodNoPolicySelectsIsNotHeld checks the cost side: when no
// pod waiting for its address is isolated, a new interface passes traffic
// from its first packet, as it did before holds existed.
func TestInterfaceOfPodNoPolicySelectsIsNotHeld(t *testing.T) {
	e := newHeldEnv(t)
	a := startKernelAgent(t, e.node, e.pin, e.client, nil)
	waitFor(t, func() bool { return a.c.Ready() == nil })
	p := e.node.AddPod(t)
	// A second reading of the node that shows the interface means the
	// reconcile of the first one is complete.
	waitFor(t, func() bool { a.c.Notify(); return a.reads(p.Ifindex) >= 2 })
	serve(t, p)
	if a.managed(p.Ifindex) {
		t.Error("the interface of a pod no policy selects was held")
	}
	if !reaches(p.NS, e.other.V4) || !reaches(e.other.NS, p.V4) {
		t.Error("the pod no policy selects could not talk before its address was known")
	}
}

// TestHeldInterfacesAcrossAgentRestart stops the agent while it holds a
// new pod's interface, checks that the pinned rules keep holding it with
// no agent running, and starts a new agent whose informers are slow to
// sync: an interface that appears meanwhile is held at deny (the node
// excepted) at once, and the first reconcile takes both over.
func TestHeldInterfacesAcrossAgentRestart(t *testing.T) {
	e := newHeldEnv(t, isolateNew())
	a := startKernelAgent(t, e.node, e.pin, e.client, nil)
	waitFor(t, func() bool { return a.c.Ready() == nil })
	p := e.node.AddPod(t)
	serve(t, p)
	waitFor(t, func() bool { return a.managed(p.Ifindex) })
	a.stop()
	e.checkNewPod(t, "no agent running", p)

	var synced atomic.Bool
	b := startKernelAgent(t, e.node, e.pin, e.client, synced.Load)
	q := e.node.AddPod(t) // a sandbox starts while the agent starts
	serve(t, q)
	if !within(2*time.Second, func() bool { return b.managed(q.Ifindex) }) {
		t.Error("an interface that appeared before the informers synced was not held")
	}
	for _, c := range []struct {
		what string
		from *netns.NS
		to   netip.Addr
		want bool
	}{
		{"unknown pod → anywhere", q.NS, e.server.V4, false},
		{"anyone → unknown pod", e.server.NS, q.V4, false},
		{"the node → unknown pod", e.node.NS, q.V4, true},
	} {
		if got := reaches(c.from, c.to); got != c.want {
			t.Errorf("before sync: %s: reached = %v, want %v", c.what, got, c.want)
		}
	}
	e.checkNewPod(t, "new agent, before sync", p)

	synced.Store(true)
	waitFor(t, func() bool { return b.c.Ready() == nil })
	// Both interfaces may be x/new's, the only pod without an address.
	e.checkNewPod(t, "new agent, synced", p)
	if got := testutil.ToFloat64(b.metrics.InterfacesHeld); got != 2 {
		t.Errorf("interfaces_held = %v, want 2", got)
	}
	e.postAddress(t, p)
	waitFor(t, func() bool { return testutil.ToFloat64(b.metrics.InterfacesHeld) == 0 })
	e.checkNewPod(t, "with its own rules", p)
	if !reaches(q.NS, e.other.V4) {
		t.Error("with no pod left waiting for its address, the other interface is still held")
	}
}
