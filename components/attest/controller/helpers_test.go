package controller

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

const (
	attesterNS = "xila-guard-system"
	testPool   = "acme"
)

var (
	workload    = sha512.Sum384([]byte("workload v1"))
	workloadRef = v1alpha1.Measurement("sha384:" + hex.EncodeToString(workload[:]))
	selector    = labels.SelectorFromSet(labels.Set{"app": "attester"})

	labOnce  sync.Once
	labChain *labtee.Chain
	labErr   error
)

// chain is the lab chain of ../testdata/labchain/lab.
func chain(t testing.TB) *labtee.Chain {
	t.Helper()
	labOnce.Do(func() { labChain, labErr = labtee.ReadSecretDir("../testdata/labchain/lab") })
	if labErr != nil {
		t.Fatal(labErr)
	}
	return labChain
}

func testScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func node(name string, uid types.UID, boot string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: map[string]string{guard.LabelTenantPool: testPool}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: boot}},
	}
}

func attesterPod(name, nodeName string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: attesterNS, Name: name, UID: uid, Labels: map[string]string{"app": "attester"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "attester",
			Ports: []corev1.ContainerPort{{Name: AttesterPortName, ContainerPort: 9443}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// fetcher answers challenges with a backend, as the attester's server
// would, and counts them.
type fetcher struct {
	backend attester.Backend
	// tamper, when set, changes the request or the evidence.
	tamper func(req *attester.Request, ev *attester.Evidence)
	err    error
	calls  atomic.Int32
	urls   []string
	mu     sync.Mutex
}

func (f *fetcher) Evidence(ctx context.Context, url string, req *attester.Request) (*attester.Evidence, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.urls = append(f.urls, url)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if f.tamper != nil {
		r := *req
		req = &r
		f.tamper(req, nil)
	}
	var devices []v1alpha1.GPUDevice
	if ds, ok := f.backend.(attester.DeviceStater); ok {
		devices = ds.Devices()
	}
	rd, err := attester.ReportDataOf(req, devices)
	if err != nil {
		return nil, err
	}
	ev, err := f.backend.Evidence(ctx, rd)
	if err != nil {
		return nil, err
	}
	ev.Devices = slices.Clone(devices) // as decoded from the answer
	if f.tamper != nil {
		f.tamper(nil, ev)
	}
	return ev, nil
}

// rig is a reconciler on a fake API server with one node and its
// attester, and the lab TEE behind the attester.
type rig struct {
	t        testing.TB
	client   client.Client
	clock    *clocktesting.FakePassiveClock
	lab      *attester.Lab
	fetcher  *fetcher
	recorder *events.FakeRecorder
	r        *Reconciler
	node     *corev1.Node
	pod      *corev1.Pod
}

func newRig(t testing.TB, objs ...client.Object) *rig {
	t.Helper()
	c := chain(t)
	clock := clocktesting.NewFakePassiveClock(time.Now().UTC().Truncate(time.Second))
	v, err := verify.New(verify.Options{LabSNPRoot: c.RootPEM(), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, clock: clock, node: node("node-1", "uid-1", "boot-1"), pod: attesterPod("attester-a", "node-1", "pod-uid-1"),
		lab: &attester.Lab{Chain: c, Measurement: workload}, recorder: events.NewFakeRecorder(16)}
	g.fetcher = &fetcher{backend: g.lab}
	g.client = fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithIndex(&corev1.Pod{}, IndexNodeName, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&resourcev1.ResourceSlice{}, resourcev1.ResourceSliceSelectorNodeName, func(o client.Object) []string {
			if n := o.(*resourcev1.ResourceSlice).Spec.NodeName; n != nil {
				return []string{*n}
			}
			return nil
		}).
		WithObjects(append([]client.Object{g.node, g.pod}, objs...)...).Build()
	m, err := NewMetrics(newRegistry(), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	g.r = &Reconciler{
		Client: g.client, Attesters: Attesters{Namespace: attesterNS, Selector: selector, Port: 8443, Scheme: "http"},
		Fetcher: g.fetcher, Verifier: v, Profile: guard.ProfileLab,
		References: StaticReferences{Measurements: []verify.Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: workloadRef}}, MinSNPTCB: c.TCB},
		Recorder:   g.recorder, Metrics: m, Clock: clock,
	}
	return g
}

func (g *rig) reconcile() reconcile.Result {
	g.t.Helper()
	res, err := g.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: g.node.Name}})
	if err != nil {
		g.t.Fatal(err)
	}
	return res
}

// state returns the node's state, or nil.
func (g *rig) state() *v1alpha1.NodeSecurityState {
	g.t.Helper()
	nss := &v1alpha1.NodeSecurityState{}
	if err := g.client.Get(context.Background(), client.ObjectKey{Name: g.node.Name}, nss); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		g.t.Fatal(err)
	}
	return nss
}

// update changes obj, status included.
func (g *rig) update(obj client.Object, mutate func()) {
	g.t.Helper()
	if err := g.client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		g.t.Fatal(err)
	}
	mutate()
	if err := g.client.Update(context.Background(), obj); err != nil {
		g.t.Fatal(err)
	}
	mutate() // Update read back the stored status
	if err := g.client.Status().Update(context.Background(), obj); err != nil {
		g.t.Fatal(err)
	}
}

// events drains the events recorded so far.
func (g *rig) events() []string {
	var out []string
	for {
		select {
		case e := <-g.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// otherNonce signs the nonce of another incarnation, as an attester that
// replays or forges answers would.
func otherNonce(req *attester.Request, _ *attester.Evidence) {
	if req != nil {
		req.Incarnation += "-earlier"
	}
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }
