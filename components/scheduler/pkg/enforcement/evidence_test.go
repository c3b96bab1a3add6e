package enforcement

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// TestBindRecordsEvidence: a pod allowed on its node's evidence is bound
// by a Binding that carries, in guard.AnnotationBoundEvidence, the judged
// node UID and the incarnation of the evidence PreBind read, and that the
// API server copies onto the pod with the bind; no other call is made. A
// pod allowed without evidence is left to the default binder and gets no
// record; a failed bind leaves the pod unbound and unrecorded; a refused
// PreBind binds nothing.
func TestBindRecordsEvidence(t *testing.T) {
	cases := []struct {
		name  string
		world func(w *world)
		// pod changes the pod before it is created.
		pod    func(p *corev1.Pod)
		bindTo string
		// between changes the world after Filter.
		between func(h *harness)
		// failBind makes the API server refuse every binding.
		failBind bool
		bind     want
		// record is the annotation the pod carries afterwards, "" for
		// none; bindings is how many bindings were sent, and how many of
		// them carried the record.
		record            string
		bindings, records int
	}{{
		name: "allowed on evidence: the node UID and incarnation judged", bindTo: "a1",
		record: "a1-uid/boot-1", bindings: 1, records: 1,
	}, {
		name: "the incarnation PreBind read, not a cached one", bindTo: "a1",
		world:   func(w *world) { w.states[0].Spec.Incarnation = "" },
		between: func(h *harness) { h.guard.put(nodeState(poolNode("a1", acme), "boot-7")) },
		record:  "a1-uid/boot-7", bindings: 1, records: 1,
	}, {
		name: "the pod's other annotations are kept", bindTo: "a2",
		pod:    annotate(map[string]string{"team": "vision"}),
		record: "a2-uid/boot-1", bindings: 1, records: 1,
	}, {
		name: "lab: mock evidence is recorded like any", bindTo: "a1",
		world: func(w *world) {
			w.profile = guard.ProfileLab
			mocked(&w.states[0].Spec)
		},
		record: "a1-uid/boot-1", bindings: 1, records: 1,
	}, {
		name: "the bind fails: the pod is neither bound nor recorded, and is retried", bindTo: "a1", failBind: true,
		bind:     want{fwk.Error, "binding pod acme-ml/train to node a1 with the evidence it was judged on (a1-uid/boot-1): the API server is unavailable"},
		bindings: 1, records: 1,
	}, {
		name: "allowed without evidence (confinement Any, a node in no pool): the default binder, no record", bindTo: "free",
		world:    func(w *world) { w.policies[0].Spec.Confinement = v1alpha1.ConfinementAny },
		bindings: 1,
	}, {
		name: "refused at PreBind: nothing bound", bindTo: "a1",
		between: func(h *harness) { h.guard.put(changed(nodeState(poolNode("a1", acme), "boot-1"), timeSliced)) },
		bind:    want{fwk.Unschedulable, "TIME_SLICING_FORBIDDEN"},
	}, {
		name: "refused for a new incarnation: nothing bound", bindTo: "a1",
		between: func(h *harness) { h.guard.put(nodeState(poolNode("a1", acme), "boot-2")) },
		bind:    want{fwk.UnschedulableAndUnresolvable, "NODE_CHANGED"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := acmeWorld()
			if tc.world != nil {
				tc.world(&w)
			}
			h := w.start(t)
			p := pod(acmeNS, "train")
			if tc.pod != nil {
				tc.pod(p)
			}
			must(t, h.core.Tracker().Add(p))
			if tc.failBind {
				h.core.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetSubresource() == "binding", nil, errors.New("the API server is unavailable")
				})
			}
			c := h.schedule(p)
			if s := c.filter[tc.bindTo]; !s.IsSuccess() {
				t.Fatalf("Filter refused %s: %v", tc.bindTo, s)
			}
			if tc.between != nil {
				tc.between(h)
			}
			h.core.ClearActions()
			check(t, "bind "+tc.bindTo, h.bind(c, p, tc.bindTo), tc.bind)

			got, err := h.core.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
			must(t, err)
			if v := got.Annotations[guard.AnnotationBoundEvidence]; v != tc.record {
				t.Errorf("annotation %s = %q, want %q", guard.AnnotationBoundEvidence, v, tc.record)
			}
			if tc.pod != nil && got.Annotations["team"] != p.Annotations["team"] {
				t.Errorf("the pod's other annotations changed: %v", got.Annotations)
			}
			if bound := tc.bind.code == fwk.Success; bound != (got.Spec.NodeName == tc.bindTo) {
				t.Errorf("pod on node %q after the bind returned %v", got.Spec.NodeName, tc.bind.code)
			}
			bindings, records := podBindings(h, p)
			if len(bindings) != tc.bindings || records != tc.records {
				t.Errorf("%d bindings, %d with the record; want %d, %d", len(bindings), records, tc.bindings, tc.records)
			}
			if n := len(h.core.Actions()) - len(bindings) - podGets(h); n != 0 {
				t.Errorf("%d calls besides the bindings: %v", n, h.core.Actions())
			}
		})
	}
}

// TestPreBindRecordsReattestedEvidence: a node attested anew at PreBind is
// recorded with the evidence the controller wrote.
func TestPreBindRecordsReattestedEvidence(t *testing.T) {
	h := attestedWorld(nil).start(t)
	h.pl.challenger = &fakeChallenger{h: h, answer: func(n string) (*v1alpha1.NodeSecurityState, error) {
		return changed(nodeState(poolNode(n, acme), "boot-1"), attestedAt(time.Now())), nil
	}}
	p := pod(acmeNS, "train")
	c := h.schedule(p)
	h.guard.put(changed(nodeState(poolNode("a1", acme), "boot-1"), attestedAt(time.Now().Add(-2*time.Hour))))
	check(t, "bind a1", h.bind(c, p, "a1"), want{})
	got, err := h.core.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	must(t, err)
	if v := got.Annotations[guard.AnnotationBoundEvidence]; v != "a1-uid/boot-1" {
		t.Errorf("annotation = %q, want a1-uid/boot-1", v)
	}
}

// TestUnprotectedPodsGetNoRecord: pods of no tenant skip PreBind and the
// plugin's Bind: the default binder binds them, with no record.
func TestUnprotectedPodsGetNoRecord(t *testing.T) {
	h := acmeWorld().start(t)
	p := pod(plain, "web")
	c := h.schedule(p)
	h.core.ClearActions()
	check(t, "bind free", h.bind(c, p, "free"), want{})
	if bindings, records := podBindings(h, p); len(bindings) != 1 || records != 0 {
		t.Errorf("%d bindings, %d with a record, for a pod of no tenant; want 1, 0", len(bindings), records)
	}
}

func annotate(a map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = a }
}

// podBindings returns the bindings sent for the pod, and how many of them
// carry a record; each must name the pod's UID.
func podBindings(h *harness, p *corev1.Pod) ([]*corev1.Binding, int) {
	h.t.Helper()
	var out []*corev1.Binding
	records := 0
	for _, a := range h.core.Actions() {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "binding" {
			continue
		}
		b := ca.GetObject().(*corev1.Binding)
		if b.Namespace != p.Namespace || b.Name != p.Name || b.UID != p.UID {
			h.t.Errorf("binding of %s/%s (UID %q), want pod %s/%s (UID %s)", b.Namespace, b.Name, b.UID, p.Namespace, p.Name, p.UID)
		}
		if _, ok := b.Annotations[guard.AnnotationBoundEvidence]; ok {
			records++
		}
		out = append(out, b)
	}
	return out, records
}

// podGets counts the test's own reads of pods.
func podGets(h *harness) int {
	n := 0
	for _, a := range h.core.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}
