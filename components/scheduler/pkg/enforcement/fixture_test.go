package enforcement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// world is the cluster a test schedules in: objects in the caches, the
// same objects as the API server's truth for PreBind, and the profile of
// the evaluator.
type world struct {
	namespaces []*corev1.Namespace
	nodes      []*corev1.Node
	bindings   []*v1alpha1.TenantBinding
	policies   []*v1alpha1.PlacementPolicy
	states     []*v1alpha1.NodeSecurityState
	pods       []*corev1.Pod

	// profile is the evaluator's; empty means production.
	profile guard.Profile
	// answerReuse is the reuse window; 0 means the default.
	answerReuse time.Duration
}

// harness is a world brought up: a scheduler framework with the plugin,
// whose evaluator is the real one behind a recorder.
type harness struct {
	t         testing.TB
	fw        framework.Framework
	pl        *Enforcement
	snapshot  *internalcache.Snapshot
	core      *fake.Clientset
	guard     *fakeGuard
	nodes     cache.Indexer
	eval      *recorder
	activated *recordingActivator
}

func (w world) start(t testing.TB) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, guard: newFakeGuard(), activated: &recordingActivator{}}

	var objs []runtime.Object
	c := &caches{
		poolLabel:  guard.LabelTenantPool,
		namespaces: cache.NewIndexer(cache.MetaNamespaceKeyFunc, namespaceIndexers),
		bindings:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, bindingIndexers),
		policies:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil),
		states:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil),
		synced:     []cache.InformerSynced{func() bool { return true }},
	}
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	h.nodes = nodeIdx
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c.nodes, c.pods = corelisters.NewNodeLister(nodeIdx), corelisters.NewPodLister(podIdx)
	for _, o := range w.namespaces {
		must(t, c.namespaces.Add(o))
		objs = append(objs, o)
	}
	for _, o := range w.nodes {
		must(t, nodeIdx.Add(o))
		objs = append(objs, o)
	}
	for _, o := range w.pods {
		must(t, podIdx.Add(o))
	}
	for _, o := range w.bindings {
		must(t, c.bindings.Add(o))
		h.guard.put(o)
	}
	for _, o := range w.policies {
		must(t, c.policies.Add(o))
		h.guard.put(o)
	}
	for _, o := range w.states {
		must(t, c.states.Add(o))
		h.guard.put(o)
	}
	h.core = fake.NewClientset(objs...)
	h.core.PrependReactor("create", "pods", h.applyBinding)
	h.snapshot = internalcache.NewSnapshot(nil, w.nodes)

	s := settings{profile: w.profile, answerReuse: w.answerReuse, poolLabel: guard.LabelTenantPool}
	if s.profile == "" {
		s.profile = guard.ProfileProduction
	}
	if s.answerReuse == 0 {
		s.answerReuse = DefaultAnswerReuse
	}
	ev, err := newEvaluator(s)
	if err != nil {
		t.Fatal(err)
	}
	h.eval = &recorder{next: ev}
	factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		h.pl = newEnforcement(ctx, fh, s, h.eval, c, h.guard)
		return h.pl, nil
	}
	h.fw, err = tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		// Bind plugins run in the order registered: the plugin first, as
		// the scheduler's profile lists it, then the default binder.
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter", "Reserve", "Bind"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, guard.SchedulerName,
		frameworkruntime.WithSnapshotSharedLister(h.snapshot),
		frameworkruntime.WithClientSet(h.core),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(h.core, 0)),
		frameworkruntime.WithPodActivator(h.activated),
	)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// cycle is what one scheduling cycle said.
type cycle struct {
	state     fwk.CycleState
	preFilter *fwk.Status
	result    *fwk.PreFilterResult
	filter    map[string]*fwk.Status
}

// schedule runs PreFilter and Filter on every node, as the scheduler does
// when PreFilter does not narrow the nodes.
func (h *harness) schedule(pod *corev1.Pod) *cycle {
	h.t.Helper()
	ctx := context.Background()
	c := &cycle{state: framework.NewCycleState(), filter: map[string]*fwk.Status{}}
	c.result, c.preFilter, _ = h.fw.RunPreFilterPlugins(ctx, c.state, pod)
	if !c.preFilter.IsSuccess() {
		return c
	}
	infos, err := h.snapshot.NodeInfos().List()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, ni := range infos {
		c.filter[ni.Node().Name] = h.fw.RunFilterPlugins(ctx, c.state, pod, ni)
	}
	return c
}

// applyBinding does what the API server does with a pod's Binding: it
// refuses one for another pod UID or for a pod already bound, and sets the
// pod's node and copies the Binding's annotations onto it in one write.
func (h *harness) applyBinding(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateAction)
	if !ok || ca.GetSubresource() != "binding" {
		return false, nil, nil
	}
	b := ca.GetObject().(*corev1.Binding)
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err := h.core.Tracker().Get(gvr, b.Namespace, b.Name)
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	if (b.UID != "" && b.UID != p.UID) || p.Spec.NodeName != "" {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name, fmt.Errorf("pod %s/%s (UID %s) is bound to %q", p.Namespace, p.Name, p.UID, p.Spec.NodeName))
	}
	p.Spec.NodeName = b.Target.Name
	for k, v := range b.Annotations {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
	return true, b, h.core.Tracker().Update(gvr, p, p.Namespace)
}

// bind runs Reserve and the Bind plugins for the node, as the scheduler's
// binding cycle does (the plugin has no PreBind). The pod is in the API
// server, as every pod the scheduler binds.
func (h *harness) bind(c *cycle, pod *corev1.Pod, node string) *fwk.Status {
	h.t.Helper()
	ctx := context.Background()
	if err := h.core.Tracker().Add(pod); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	if s := h.fw.RunReservePluginsReserve(ctx, c.state, pod, node); !s.IsSuccess() {
		h.t.Fatalf("Reserve: %v", s)
	}
	if s := h.fw.RunPreBindPreFlights(ctx, c.state, pod, node); !s.IsSkip() {
		h.t.Fatalf("PreBind pre-flight %v: want Skip, so that kube-scheduler writes no nominatedNodeName first", s)
	}
	return h.fw.RunBindPlugins(ctx, c.state, pod, node)
}

// recorder stands between the plugin and the real evaluator: it counts
// and keeps the requests, and tamper, when set, changes the answers.
type recorder struct {
	next  evaluator
	calls atomic.Int64

	mu       sync.Mutex
	requests []*wire.EvaluateRequest
	tamper   func(*wire.EvaluateResponse) *wire.EvaluateResponse
}

func (r *recorder) Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse {
	r.calls.Add(1)
	r.mu.Lock()
	r.requests = append(r.requests, req)
	tamper := r.tamper
	r.mu.Unlock()
	resp := r.next.Evaluate(req)
	if tamper != nil {
		resp = tamper(resp)
	}
	return resp
}

// setTamper changes the answers from now on; nil stops.
func (r *recorder) setTamper(f func(*wire.EvaluateResponse) *wire.EvaluateResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper = f
}

// asked returns the requests so far.
func (r *recorder) asked() []*wire.EvaluateRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*wire.EvaluateRequest(nil), r.requests...)
}

// fakeGuard is the API server's truth about the guard kinds, for PreBind.
type fakeGuard struct {
	mu   sync.Mutex
	objs map[string]runtime.Object
}

func newFakeGuard() *fakeGuard { return &fakeGuard{objs: map[string]runtime.Object{}} }

func (g *fakeGuard) put(o runtime.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := o.(metav1.Object)
	g.objs[key(o, m.GetName())] = o
}

func (g *fakeGuard) remove(o runtime.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.objs, key(o, o.(metav1.Object).GetName()))
}

func key(o runtime.Object, name string) string {
	switch o.(type) {
	case *v1alpha1.NodeSecurityState:
		return "nss/" + name
	case *v1alpha1.TenantBinding:
		return "tb/" + name
	}
	return "pp/" + name
}

func fakeGet[T runtime.Object](g *fakeGuard, k string) (T, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.objs[k]
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(v1alpha1.Resource("x"), k)
	}
	return o.DeepCopyObject().(T), nil
}

func (g *fakeGuard) NodeSecurityState(_ context.Context, name string) (*v1alpha1.NodeSecurityState, error) {
	return fakeGet[*v1alpha1.NodeSecurityState](g, "nss/"+name)
}

func (g *fakeGuard) PlacementPolicy(_ context.Context, name string) (*v1alpha1.PlacementPolicy, error) {
	return fakeGet[*v1alpha1.PlacementPolicy](g, "pp/"+name)
}

// recordingActivator records the pods the plugin wakes.
type recordingActivator struct {
	mu   sync.Mutex
	pods []string
}

func (r *recordingActivator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range pods {
		r.pods = append(r.pods, k)
	}
}

func (r *recordingActivator) woken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.pods...)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func setOf(names ...string) sets.Set[string] { return sets.New(names...) }
