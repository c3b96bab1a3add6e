package enforcement

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// world is the cluster a test schedules in: objects in the caches, the
// same objects as the API server's truth for PreBind, and an evaluator.
type world struct {
	namespaces []*corev1.Namespace
	nodes      []*corev1.Node
	bindings   []*v1alpha1.TenantBinding
	policies   []*v1alpha1.PlacementPolicy
	states     []*v1alpha1.NodeSecurityState
	pods       []*corev1.Pod

	evaluator   http.Handler
	evalTimeout time.Duration
	perNode     bool
	// answerReuse is the reuse window; 0 means the default.
	answerReuse time.Duration
}

// harness is a world brought up: a scheduler framework with the plugin.
type harness struct {
	t         *testing.T
	fw        framework.Framework
	pl        *Enforcement
	snapshot  *internalcache.Snapshot
	core      *fake.Clientset
	guard     *fakeGuard
	nodes     cache.Indexer
	eval      *swappable
	activated *recordingActivator
}

func (w world) start(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, guard: newFakeGuard(), eval: &swappable{}, activated: &recordingActivator{}}
	h.eval.set(w.evaluator)
	srv := httptest.NewServer(h.eval)
	t.Cleanup(srv.Close)
	timeout := w.evalTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	ev, err := client.New(srv.URL, client.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}

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
	h.snapshot = internalcache.NewSnapshot(nil, w.nodes)

	reuse := w.answerReuse
	if reuse == 0 {
		reuse = DefaultAnswerReuse
	}
	s := settings{coreURL: srv.URL, profile: guard.ProfileProduction, evalTimeout: timeout,
		answerReuse: reuse, poolLabel: guard.LabelTenantPool, evaluatePerNode: w.perNode}
	factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		h.pl = newEnforcement(ctx, fh, s, ev, c, h.guard)
		return h.pl, nil
	}
	h.fw, err = tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter", "Reserve", "PreBind"),
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

// bind runs Reserve, the PreBind pre-flight and PreBind for the node.
func (h *harness) bind(c *cycle, pod *corev1.Pod, node string) *fwk.Status {
	h.t.Helper()
	ctx := context.Background()
	if s := h.fw.RunReservePluginsReserve(ctx, c.state, pod, node); !s.IsSuccess() {
		h.t.Fatalf("Reserve: %v", s)
	}
	if s := h.fw.RunPreBindPreFlights(ctx, c.state, pod, node); s.IsSkip() {
		return nil
	} else if !s.IsSuccess() {
		return s
	}
	return h.fw.RunPreBindPlugins(ctx, c.state, pod, node)
}

// swappable is an http.Handler that can be replaced while serving.
type swappable struct {
	h     atomic.Value
	calls atomic.Int64
}

func (s *swappable) set(h http.Handler) { s.h.Store(&h) }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	(*s.h.Load().(*http.Handler)).ServeHTTP(w, r)
}

// script answers like an evaluator: the pod is refused when the request
// lacks a tenant or policy; otherwise each node gets its scripted result,
// or fallback.
func script(byNode map[string]wire.NodeResult, fallback wire.NodeResult) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req wire.EvaluateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := wire.EvaluateResponse{Profile: guard.ProfileProduction, EvaluatedAt: metav1.Now(),
			Pod: wire.Verdict{Decision: guard.DecisionAllow, Reasons: []guard.Reason{}, Message: "resolved"}}
		switch {
		case req.Tenant == nil:
			resp.Pod = wire.Verdict{Decision: guard.DecisionIndeterminate, Reasons: []guard.Reason{guard.ReasonTenantUnresolved},
				Message: "TENANT_UNRESOLVED: the pod's tenant could not be resolved"}
		case req.Policy == nil:
			resp.Pod = wire.Verdict{Decision: guard.DecisionIndeterminate, Reasons: []guard.Reason{guard.ReasonNoPolicy},
				Message: "NO_POLICY: no PlacementPolicy applies"}
		}
		for _, n := range req.Nodes {
			res, ok := byNode[n.Name]
			if !ok {
				res = fallback
			}
			if resp.Pod.Decision != guard.DecisionAllow {
				res = wire.NodeResult{Decision: resp.Pod.Decision, Reasons: resp.Pod.Reasons, Message: resp.Pod.Message}
			}
			res.Node = n.Name
			if n.State != nil {
				res.Incarnation = n.State.Incarnation
			}
			if res.Reasons == nil {
				res.Reasons = []guard.Reason{}
			}
			resp.Results = append(resp.Results, res)
		}
		w.Header().Set("Content-Type", wire.ContentType)
		_ = json.NewEncoder(w).Encode(resp)
	}
}

func result(d guard.Decision, reason guard.Reason, msg string) wire.NodeResult {
	r := wire.NodeResult{Decision: d, Reasons: []guard.Reason{}, Message: msg}
	if reason != "" {
		r.Reasons = []guard.Reason{reason}
		r.Message = string(reason) + ": " + msg
	}
	return r
}

var allowAll = script(nil, result(guard.DecisionAllow, "", "allowed"))

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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// decodeRequest reads an evaluation request, leaving the body readable.
func decodeRequest(t *testing.T, r *http.Request) wire.EvaluateRequest {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req wire.EvaluateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Error(err)
	}
	return req
}

func setOf(names ...string) sets.Set[string] { return sets.New(names...) }
