package enforcement

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// The evidence a test may give a node, as changes to nodeState's.
var (
	timeSliced = func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices[0].SharingMode = v1alpha1.SharingTimeSlicing }
	mocked     = func(s *v1alpha1.NodeSecurityStateSpec) { s.Source = v1alpha1.SourceMock }
	stale      = func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt = metav1.NewTime(time.Now().Add(-time.Hour)) }
	incomplete = func(s *v1alpha1.NodeSecurityStateSpec) { s.Complete = false }
)

// changed returns a copy of the state with its spec changed.
func changed(s *v1alpha1.NodeSecurityState, change func(*v1alpha1.NodeSecurityStateSpec)) *v1alpha1.NodeSecurityState {
	s = s.DeepCopy()
	change(&s.Spec)
	return s
}

// Answers that do not match their request, as an evaluator could only
// give through a bug.
var (
	dropsLast = func(r *wire.EvaluateResponse) *wire.EvaluateResponse {
		r.Results = r.Results[:len(r.Results)-1]
		return r
	}
	renames = func(r *wire.EvaluateResponse) *wire.EvaluateResponse {
		r.Results[0].Node = "elsewhere"
		return r
	}
	reorders = func(r *wire.EvaluateResponse) *wire.EvaluateResponse {
		slices.Reverse(r.Results)
		return r
	}
	duplicates = func(r *wire.EvaluateResponse) *wire.EvaluateResponse {
		r.Results = append(r.Results, r.Results[0])
		return r
	}
	unknownDecision = func(r *wire.EvaluateResponse) *wire.EvaluateResponse {
		r.Pod.Decision = "maybe"
		return r
	}
	noAnswer = func(*wire.EvaluateResponse) *wire.EvaluateResponse { return nil }
)

// want is what a row expects of one extension point: a status code and a
// fragment of its message.
type want struct {
	code fwk.Code
	msg  string
}

func check(t *testing.T, what string, got *fwk.Status, w want) {
	t.Helper()
	if got.Code() != w.code {
		t.Errorf("%s: code %v (%q), want %v", what, got.Code(), got.Message(), w.code)
	}
	if !strings.Contains(got.Message(), w.msg) {
		t.Errorf("%s: message %q does not contain %q", what, got.Message(), w.msg)
	}
}

// TestConditionTable walks every row of the architecture's scheduler
// condition table through PreFilter, Filter and PreBind.
func TestConditionTable(t *testing.T) {
	const (
		ok    = fwk.Success
		no    = fwk.Unschedulable
		never = fwk.UnschedulableAndUnresolvable
	)
	mismatch := want{never, "TENANT_MISMATCH"}
	outside := want{never, "OUTSIDE_POOL"}
	cases := []struct {
		name  string
		world func(w *world)
		pod   *corev1.Pod
		// tamper, if set, changes every answer of the evaluator.
		tamper    func(*wire.EvaluateResponse) *wire.EvaluateResponse
		preFilter want
		filter    map[string]want
		// bindTo, if set, runs Reserve and PreBind for that node, after
		// between has changed the world.
		bindTo  string
		between func(h *harness)
		bind    want
		// calls is how many times the evaluator is asked, in all.
		calls int64
	}{{
		name:   "unprotected pod: node outside every pool passes, pool nodes are closed",
		pod:    pod(plain, "web"),
		filter: map[string]want{"free": {}, "a1": mismatch, "g1": {never, "belongs to no tenant"}},
		bindTo: "free", calls: 0,
	}, {
		name: "unprotected pod tolerating the pool taint still stays off the pool",
		pod: func() *corev1.Pod {
			p := pod(plain, "sneaky")
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			return p
		}(),
		filter: map[string]want{"a1": mismatch, "free": {}},
		calls:  0,
	}, {
		name:   "allow: the tenant's pool nodes pass without a toleration",
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {}, "a2": {}, "free": outside, "g1": mismatch},
		bindTo: "a1", bind: want{}, calls: 2,
	}, {
		name:   "deny: Unschedulable with the reason code",
		world:  func(w *world) { timeSliced(&w.states[0].Spec) },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {no, "(deny): TIME_SLICING_FORBIDDEN: "}, "a2": {}},
		calls:  1,
	}, {
		name:   "indeterminate: source not accepted",
		world:  func(w *world) { mocked(&w.states[0].Spec) },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "(indeterminate): SOURCE_NOT_ACCEPTED: mock evidence is simulated"}, "a2": {}},
		calls:  1,
	}, {
		name:   "indeterminate: stale evidence",
		world:  func(w *world) { stale(&w.states[0].Spec) },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "(indeterminate): EVIDENCE_STALE"}, "a2": {}},
		calls:  1,
	}, {
		name:   "indeterminate: incomplete evidence",
		world:  func(w *world) { incomplete(&w.states[0].Spec) },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "(indeterminate): EVIDENCE_INCOMPLETE"}, "a2": {}},
		calls:  1,
	}, {
		name:   "indeterminate: no evidence",
		world:  func(w *world) { w.states = w.states[1:] },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "(indeterminate): EVIDENCE_MISSING"}, "a2": {}},
		calls:  1,
	}, {
		name:   "an answer with a node missing refuses every node",
		tamper: dropsLast,
		pod:    pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_ERROR: the evaluator's answer does not match the request: 2 result(s) for 3 node(s)"}, calls: 1,
	}, {
		name:   "an answer about another node refuses every node",
		tamper: renames,
		pod:    pod(acmeNS, "train"), preFilter: want{never, `is about node "elsewhere"`}, calls: 1,
	}, {
		name:   "an answer out of order refuses every node",
		tamper: reorders,
		pod:    pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_ERROR"}, calls: 1,
	}, {
		name:   "an answer with a node twice refuses every node",
		tamper: duplicates,
		pod:    pod(acmeNS, "train"), preFilter: want{never, "4 result(s) for 3 node(s)"}, calls: 1,
	}, {
		name:   "an unknown decision about the pod refuses every node",
		tamper: unknownDecision,
		pod:    pod(acmeNS, "train"), preFilter: want{never, `pod decision "maybe"`}, calls: 1,
	}, {
		name:   "no answer refuses every node",
		tamper: noAnswer,
		pod:    pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_ERROR"}, calls: 1,
	}, {
		name: "identity unresolved: two bindings list the namespace",
		world: func(w *world) {
			w.bindings = append(w.bindings, fixture.MakeTenantBinding(globex, acmeNS).Policy("strict").Obj())
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "(indeterminate): TENANT_UNRESOLVED"}, calls: 1,
	}, {
		name: "identity unresolved: label contradicts the binding",
		world: func(w *world) {
			w.namespaces = append(w.namespaces, fixture.MakeNamespace("shared").Tenant(globex).Obj())
			w.bindings[0].Spec.Namespaces = append(w.bindings[0].Spec.Namespaces, "shared")
		},
		pod: pod("shared", "train"), preFilter: want{never, "labelled guard.xila.us/tenant=globex but listed by the TenantBinding of tenant acme"}, calls: 1,
	}, {
		name:  "no policy: neither reference nor annotation",
		world: func(w *world) { w.bindings[0].Spec.EffectivePolicyRef = nil },
		pod:   pod(acmeNS, "train"), preFilter: want{never, "(indeterminate): NO_POLICY"}, calls: 1,
	}, {
		name:  "no policy: the referenced policy does not exist",
		world: func(w *world) { w.bindings[0].Spec.EffectivePolicyRef.Name = "gone" },
		pod:   pod(acmeNS, "train"), preFilter: want{never, "PlacementPolicy gone, named by TenantBinding acme, does not exist"}, calls: 1,
	}, {
		name: "namespace annotation is the fallback policy",
		world: func(w *world) {
			w.bindings[0].Spec.EffectivePolicyRef = nil
			w.namespaces[0].Annotations = map[string]string{guard.AnnotationPolicy: "strict"}
		},
		pod: pod(acmeNS, "train"), filter: map[string]want{"a1": {}}, bindTo: "a1", calls: 2,
	}, {
		name: "labelled namespace without a binding is protected, and its tenant unresolved",
		world: func(w *world) {
			w.bindings = nil
			w.namespaces[0].Annotations = map[string]string{guard.AnnotationPolicy: "strict"}
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "TENANT_UNRESOLVED"}, calls: 1,
	}, {
		name:   "confinement Any: a node in no pool is allowed",
		world:  func(w *world) { w.policies[0].Spec.Confinement = v1alpha1.ConfinementAny },
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"free": {}, "a1": {}, "g1": mismatch},
		bindTo: "free", calls: 2,
	}, {
		name: "PreBind: node replaced (new UID) since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			n := poolNode("a1", acme)
			n.UID = "a1-reborn"
			replaceNode(h, n)
		},
		bind: want{never, "NODE_CHANGED: node a1 was replaced"}, calls: 1,
	}, {
		name: "PreBind: evidence now describes another node UID",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			n := poolNode("a1", acme)
			n.UID = "a1-reborn"
			h.guard.put(nodeState(n, "boot-2"))
		},
		bind: want{never, "NODE_CHANGED: the evidence of node a1 now describes node UID a1-reborn, not the judged a1-uid"}, calls: 1,
	}, {
		name: "PreBind: node deleted since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			must(h.t, h.nodes.Delete(poolNode("a1", acme)))
		},
		bind: want{never, "NODE_CHANGED: node a1 was deleted"}, calls: 1,
	}, {
		name: "PreBind: evidence incarnation changed since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.put(nodeState(poolNode("a1", acme), "boot-2"))
		},
		bind: want{never, "NODE_CHANGED: the evidence of node a1 changed incarnation after it was judged: boot-1, now boot-2"}, calls: 1,
	}, {
		name: "PreBind: evidence removed since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.remove(nodeState(poolNode("a1", acme), ""))
		},
		bind: want{never, "boot-1, now none"}, calls: 1,
	}, {
		name: "PreBind: fresh evidence is now denied, the cached one not yet",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.put(changed(nodeState(poolNode("a1", acme), "boot-1"), timeSliced))
		},
		bind: want{no, "(deny): TIME_SLICING_FORBIDDEN"}, calls: 2,
	}, {
		name: "PreBind: fresh evidence is now stale",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.put(changed(nodeState(poolNode("a1", acme), "boot-1"), stale))
		},
		bind: want{never, "(indeterminate): EVIDENCE_STALE"}, calls: 2,
	}, {
		name: "PreBind: an answer that does not match refuses the bind",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.eval.setTamper(renames)
		},
		bind: want{never, "EVALUATOR_ERROR"}, calls: 2,
	}, {
		name: "PreBind: the namespace changed tenant",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			must(h.t, h.pl.caches.bindings.Update(fixture.MakeTenantBinding(globex, acmeNS).Policy("strict").Obj()))
			must(h.t, h.pl.caches.bindings.Delete(fixture.MakeTenantBinding(acme).Obj()))
		},
		bind: want{never, "TENANT_UNRESOLVED: the tenant or pool of namespace acme-ml changed after the pod was judged"}, calls: 1,
	}, {
		name: "PreBind: policy deleted since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.remove(fixture.MakePlacementPolicy("strict").Obj())
		},
		bind: want{never, "(indeterminate): NO_POLICY"}, calls: 2,
	}, {
		name: "taints: other NoSchedule taints still need a toleration",
		world: func(w *world) {
			w.nodes[0].Spec.Taints = append(w.nodes[0].Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule})
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "untolerated taint {maintenance: }"}, "a2": {}},
		calls:  1,
	}, {
		name: "taints: a NoExecute pool taint is not tolerated implicitly",
		world: func(w *world) {
			w.nodes[0].Spec.Taints[0].Effect = corev1.TaintEffectNoExecute
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "untolerated taint {guard.xila.us/tenant-pool: acme}"}, "a2": {}},
		calls:  1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := acmeWorld()
			if tc.world != nil {
				tc.world(&w)
			}
			h := w.start(t)
			h.eval.setTamper(tc.tamper)
			c := h.schedule(tc.pod)
			check(t, "PreFilter", c.preFilter, tc.preFilter)
			for node, want := range tc.filter {
				check(t, "Filter "+node, c.filter[node], want)
			}
			if tc.bindTo != "" {
				if s := c.filter[tc.bindTo]; !s.IsSuccess() {
					t.Fatalf("Filter refused %s, the node to bind to: %v", tc.bindTo, s)
				}
				if tc.between != nil {
					tc.between(h)
				}
				check(t, "PreBind "+tc.bindTo, h.bind(c, tc.pod, tc.bindTo), tc.bind)
			}
			if got := h.eval.calls.Load(); got != tc.calls {
				t.Errorf("evaluator called %d times, want %d", got, tc.calls)
			}
		})
	}
}

func replaceNode(h *harness, n *corev1.Node) {
	must(h.t, h.nodes.Update(n))
}

// TestPreFilterAsksOncePerCycle checks the snapshot: one evaluation
// carries the tenant's pool with its evidence and one node in no pool,
// and Filter narrows the cycle to the pool.
func TestPreFilterAsksOncePerCycle(t *testing.T) {
	h := acmeWorld().start(t)
	c := h.schedule(pod(acmeNS, "train"))
	got := h.eval.asked()
	if len(got) != 1 {
		t.Fatalf("%d evaluations, want 1", len(got))
	}
	req := got[0]
	var names []string
	for _, n := range req.Nodes {
		names = append(names, n.Name)
		if n.Pool == acme && (n.State == nil || n.State.Incarnation != "boot-1" || n.UID != types.UID(n.Name+"-uid")) {
			t.Errorf("node %s judged without its evidence or UID: %+v", n.Name, n)
		}
	}
	slices.Sort(names[:2]) // the pool, in the snapshot's order; the node in no pool comes last
	if strings.Join(names, ",") != "a1,a2,free" {
		t.Errorf("nodes judged: %v, want a1,a2,free", names)
	}
	if req.Profile != guard.ProfileProduction || req.Tenant.ID != acme || req.Policy.Name != "strict" || req.Pod.Name != "train" {
		t.Errorf("request = %+v", req)
	}
	if c.result == nil || !c.result.NodeNames.Equal(setOf("a1", "a2")) {
		t.Errorf("PreFilterResult = %v, want the pool a1, a2", c.result)
	}
}

// TestProfiles checks that the evaluator applies the plugin's profile:
// production refuses mock evidence, lab accepts it as simulated
// integration, and neither lets a forbidden sharing mode through.
func TestProfiles(t *testing.T) {
	for _, tc := range []struct {
		profile guard.Profile
		a1, a2  want
	}{{
		profile: guard.ProfileProduction,
		a1:      want{fwk.UnschedulableAndUnresolvable, "(indeterminate): SOURCE_NOT_ACCEPTED: mock evidence is simulated and the production profile never accepts it"},
		a2:      want{fwk.UnschedulableAndUnresolvable, "SOURCE_NOT_ACCEPTED"},
	}, {
		profile: guard.ProfileLab,
		a1:      want{},
		a2:      want{fwk.Unschedulable, "(deny): TIME_SLICING_FORBIDDEN"},
	}} {
		t.Run(string(tc.profile), func(t *testing.T) {
			w := acmeWorld()
			w.profile = tc.profile
			for _, s := range w.states {
				mocked(&s.Spec)
			}
			timeSliced(&w.states[1].Spec)
			h := w.start(t)
			if got := h.eval.next.(*evaluate.Evaluator).Profile(); got != tc.profile {
				t.Errorf("the evaluator's profile is %q, want %q", got, tc.profile)
			}
			p := pod(acmeNS, "train")
			c := h.schedule(p)
			check(t, "Filter a1", c.filter["a1"], tc.a1)
			check(t, "Filter a2", c.filter["a2"], tc.a2)
			if c.filter["a1"].IsSuccess() {
				check(t, "PreBind a1", h.bind(c, p, "a1"), want{})
			}
			for _, req := range h.eval.asked() {
				if req.Profile != tc.profile {
					t.Errorf("asked for profile %q, want %q", req.Profile, tc.profile)
				}
			}
		})
	}
}

// TestCheckAnswer holds answers against their request.
func TestCheckAnswer(t *testing.T) {
	req := &wire.EvaluateRequest{Nodes: []wire.Node{{Name: "a1"}, {Name: "a2"}}}
	answer := func() *wire.EvaluateResponse {
		return &wire.EvaluateResponse{Pod: wire.Verdict{Decision: guard.DecisionAllow},
			Results: []wire.NodeResult{{Node: "a1", Decision: guard.DecisionAllow}, {Node: "a2", Decision: guard.DecisionDeny}}}
	}
	if err := checkAnswer(req, answer()); err != nil {
		t.Errorf("a matching answer: %v", err)
	}
	for name, tamper := range map[string]func(*wire.EvaluateResponse) *wire.EvaluateResponse{
		"a node missing": dropsLast, "another node": renames, "out of order": reorders,
		"a node twice": duplicates, "an unknown pod decision": unknownDecision, "no answer": noAnswer,
	} {
		if err := checkAnswer(req, tamper(answer())); !errors.Is(err, errMismatch) {
			t.Errorf("%s: error %v, want a mismatch", name, err)
		}
	}
}

// TestCachesNotSynced refuses every pod, protected or not, until the
// caches can tell which pods are protected.
func TestCachesNotSynced(t *testing.T) {
	h := acmeWorld().start(t)
	h.pl.caches.synced = append(h.pl.caches.synced, func() bool { return false })
	check(t, "PreFilter", h.schedule(pod(plain, "web")).preFilter, want{fwk.Error, "waiting for the caches"})
}
