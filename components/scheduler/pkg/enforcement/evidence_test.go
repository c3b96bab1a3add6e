package enforcement

import (
	"context"
	"encoding/json"
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

// TestPreBindRecordsEvidence: a pod allowed on its node's evidence is
// bound only once guard.AnnotationBoundEvidence records the judged node
// UID and the incarnation of the evidence PreBind read; a pod allowed
// without evidence gets no record and loses a stale one; a failed write
// fails PreBind; a refused bind writes nothing.
func TestPreBindRecordsEvidence(t *testing.T) {
	const stored = "old-uid/boot-0" // a record left by an earlier attempt
	cases := []struct {
		name  string
		world func(w *world)
		// pod changes the pod before it is created.
		pod    func(p *corev1.Pod)
		bindTo string
		// between changes the world after Filter.
		between func(h *harness)
		// failPatch makes the API server refuse every pod patch.
		failPatch bool
		bind      want
		// record is the annotation the pod carries afterwards, "" for
		// none; patches is how many pod patches PreBind sent.
		record  string
		patches int
	}{{
		name: "allowed on evidence: the node UID and incarnation judged", bindTo: "a1",
		record: "a1-uid/boot-1", patches: 1,
	}, {
		name: "the incarnation PreBind read, not a cached one", bindTo: "a1",
		world:   func(w *world) { w.states[0].Spec.Incarnation = "" },
		between: func(h *harness) { h.guard.put(nodeState(poolNode("a1", acme), "boot-7")) },
		record:  "a1-uid/boot-7", patches: 1,
	}, {
		name: "a record of an earlier attempt is replaced, other annotations kept", bindTo: "a2",
		pod:    annotate(map[string]string{guard.AnnotationBoundEvidence: stored, "team": "vision"}),
		record: "a2-uid/boot-1", patches: 1,
	}, {
		name: "lab: mock evidence is recorded like any", bindTo: "a1",
		world: func(w *world) {
			w.profile = guard.ProfileLab
			mocked(&w.states[0].Spec)
		},
		record: "a1-uid/boot-1", patches: 1,
	}, {
		name: "the write fails: PreBind fails, the bind is retried", bindTo: "a1", failPatch: true,
		bind: want{fwk.Error, "recording on pod acme-ml/train the evidence of node a1 it was judged on (a1-uid/boot-1): the API server is unavailable"}, patches: 1,
	}, {
		name: "allowed without evidence (confinement Any, a node in no pool): no record", bindTo: "free",
		world: func(w *world) { w.policies[0].Spec.Confinement = v1alpha1.ConfinementAny },
	}, {
		name: "allowed without evidence: a record of an earlier attempt is removed", bindTo: "free",
		world:   func(w *world) { w.policies[0].Spec.Confinement = v1alpha1.ConfinementAny },
		pod:     annotate(map[string]string{guard.AnnotationBoundEvidence: stored}),
		patches: 1,
	}, {
		name: "allowed without evidence, removing a stale record fails: PreBind fails", bindTo: "free", failPatch: true,
		world: func(w *world) { w.policies[0].Spec.Confinement = v1alpha1.ConfinementAny },
		pod:   annotate(map[string]string{guard.AnnotationBoundEvidence: stored}),
		bind:  want{fwk.Error, "removing from pod acme-ml/train the evidence an earlier attempt to bind it recorded"},
		// The pod keeps what it had: the key broker finds that it names
		// another node's evidence.
		record: stored, patches: 1,
	}, {
		name: "refused at PreBind: nothing written", bindTo: "a1",
		between: func(h *harness) { h.guard.put(changed(nodeState(poolNode("a1", acme), "boot-1"), timeSliced)) },
		bind:    want{fwk.Unschedulable, "TIME_SLICING_FORBIDDEN"},
	}, {
		name: "refused for a new incarnation: nothing written", bindTo: "a1",
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
			if tc.failPatch {
				h.core.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("the API server is unavailable")
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
			check(t, "PreBind "+tc.bindTo, h.bind(c, p, tc.bindTo), tc.bind)

			got, err := h.core.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
			must(t, err)
			if v := got.Annotations[guard.AnnotationBoundEvidence]; v != tc.record {
				t.Errorf("annotation %s = %q, want %q", guard.AnnotationBoundEvidence, v, tc.record)
			}
			if tc.pod != nil && tc.record != "" && got.Annotations["team"] != p.Annotations["team"] {
				t.Errorf("the pod's other annotations changed: %v", got.Annotations)
			}
			patches := podPatches(h)
			if len(patches) != tc.patches {
				t.Fatalf("%d pod patches, want %d: %v", len(patches), tc.patches, patches)
			}
			for _, pa := range patches {
				checkRecordPatch(t, pa, p)
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
	check(t, "PreBind a1", h.bind(c, p, "a1"), want{})
	got, err := h.core.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	must(t, err)
	if v := got.Annotations[guard.AnnotationBoundEvidence]; v != "a1-uid/boot-1" {
		t.Errorf("annotation = %q, want a1-uid/boot-1", v)
	}
}

// TestUnprotectedPodsGetNoRecord: pods of no tenant skip PreBind, and
// nothing is written on them.
func TestUnprotectedPodsGetNoRecord(t *testing.T) {
	h := acmeWorld().start(t)
	p := pod(plain, "web")
	c := h.schedule(p)
	h.core.ClearActions()
	check(t, "PreBind free", h.bind(c, p, "free"), want{})
	if patches := podPatches(h); len(patches) != 0 {
		t.Errorf("pod patches for a pod of no tenant: %v", patches)
	}
}

func annotate(a map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = a }
}

// podPatches returns the pod patches sent to the API server.
func podPatches(h *harness) []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range h.core.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "pods" {
			out = append(out, pa)
		}
	}
	return out
}

// checkRecordPatch holds a patch to what PreBind may send: a JSON merge
// patch of the pod, naming its UID, that touches only the annotation.
func checkRecordPatch(t *testing.T, pa k8stesting.PatchAction, p *corev1.Pod) {
	t.Helper()
	if pa.GetName() != p.Name || pa.GetNamespace() != p.Namespace || pa.GetSubresource() != "" {
		t.Errorf("patch of %s/%s/%s, want pod %s/%s", pa.GetNamespace(), pa.GetName(), pa.GetSubresource(), p.Namespace, p.Name)
	}
	if pa.GetPatchType() != "application/merge-patch+json" {
		t.Errorf("patch type %s, want a JSON merge patch", pa.GetPatchType())
	}
	var body struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
		t.Fatalf("patch %s: %v", pa.GetPatch(), err)
	}
	var annotations map[string]*string
	if err := json.Unmarshal(body.Metadata["annotations"], &annotations); err != nil {
		t.Fatalf("patch %s: %v", pa.GetPatch(), err)
	}
	var top map[string]json.RawMessage
	must(t, json.Unmarshal(pa.GetPatch(), &top))
	if len(top) != 1 || len(body.Metadata) != 2 || len(annotations) != 1 {
		t.Errorf("patch %s: want metadata.uid and the one annotation only", pa.GetPatch())
	}
	if _, ok := annotations[guard.AnnotationBoundEvidence]; !ok {
		t.Errorf("patch %s does not name %s", pa.GetPatch(), guard.AnnotationBoundEvidence)
	}
	if string(body.Metadata["uid"]) != `"`+string(p.UID)+`"` {
		t.Errorf("patch %s: want the pod's UID %s as a precondition", pa.GetPatch(), p.UID)
	}
}
