package enforcer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
)

// BenchmarkSyncNewPod measures the reconcile that follows a new pod's
// address on a node of 20 pods, modelled on netpol-bench's churn: every pod
// is isolated and may send to every pod of the namespace, so the new
// address changes every pod's egress rules. It reports how long the new
// pod's own interface waited for its endpoint entry (new-pod-ms, while its
// traffic is not judged by its policy; polled every 200 µs) and the whole
// Sync (sync-ms).
func BenchmarkSyncNewPod(b *testing.B) {
	if err := features.HaveProgramType(ebpf.Netfilter); errors.Is(err, ebpf.ErrNotSupported) {
		b.Skipf("kernel lacks netfilter BPF programs: %v", err)
	}
	const existing = 20
	node := netns.NewNode(b, existing+1)
	var pods []*corev1.Pod
	var local []Pod
	for i, p := range node.Pods {
		name := "p-" + strconv.Itoa(i)
		pods = append(pods, fx.MakePod("x", name).Label("group", strconv.Itoa(i%4)).
			IPs(p.V4.String(), p.V6.String()).Port("http", corev1.ProtocolTCP, 8080).Obj())
		local = append(local, Pod{Key: types.NamespacedName{Namespace: "x", Name: name},
			Endpoint: dataplane.Endpoint{Ifindex: p.Ifindex, Addrs: p.Addrs()}})
	}
	var policies []*networkingv1.NetworkPolicy
	for g := range 4 {
		policies = append(policies, fx.MakePolicy("x", fmt.Sprintf("np-%d", g)).Select("group", strconv.Itoa(g)).
			Types(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			Ingress(fx.Peers(fx.PodPeer(fx.Labels("group", strconv.Itoa((g+1)%4)))),
				fx.NamedPort(corev1.ProtocolTCP, "http"), fx.PortRange(corev1.ProtocolTCP, 80, 90)).
			Egress(fx.Peers(fx.PodPeer(fx.Labels()))).Obj())
	}
	compile := func(pods []*corev1.Pod) map[types.NamespacedName]compiler.PodRules {
		c := compiler.New(compiler.Input{Pods: pods, Namespaces: []*corev1.Namespace{fx.Namespace("x")}, NetworkPolicies: policies}, compiler.Options{})
		out := map[types.NamespacedName]compiler.PodRules{}
		for _, r := range c.All() {
			out[r.Pod] = r
		}
		return out
	}
	without, with := compile(pods[:existing]), compile(pods)

	pin := b.TempDir()
	if err := unix.Mount("bpf", pin, "bpf", 0, ""); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Unmount(pin, unix.MNT_DETACH) })
	var dp *dataplane.Dataplane
	if err := node.NS.Do(func() (err error) {
		dp, err = dataplane.Open(dataplane.Config{PinPath: pin + "/xg"})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	e := New(dp)
	sync := func(pods []Pod, compiled map[types.NamespacedName]compiler.PodRules) {
		b.Helper()
		if err := node.NS.Do(func() error {
			out, err := e.Sync(pods, compiled, nil, nil)
			for _, o := range out {
				err = errors.Join(err, o.Err)
			}
			return err
		}); err != nil {
			b.Fatalf("Sync: %v", err)
		}
	}
	newPod := local[existing].Endpoint.Ifindex
	var waited, total []time.Duration
	for b.Loop() {
		sync(local[:existing], without)
		seen := make(chan time.Time, 1)
		go func() {
			for {
				if ifs, _ := dp.Endpoints(); slices.Contains(ifs, newPod) {
					seen <- time.Now()
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
		start := time.Now()
		sync(local, with)
		total = append(total, time.Since(start))
		waited = append(waited, (<-seen).Sub(start))
	}
	slices.Sort(waited)
	slices.Sort(total)
	b.ReportMetric(float64(waited[len(waited)/2].Microseconds())/1000, "new-pod-ms")
	b.ReportMetric(float64(total[len(total)/2].Microseconds())/1000, "sync-ms")
}
