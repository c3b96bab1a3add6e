package enforcement

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// acmeScript answers as the evaluator would in acmeWorld: a node in no
// pool is outside acme's pool, acme's nodes get the given results or an
// allow.
func acmeScript(byNode map[string]wire.NodeResult) http.HandlerFunc {
	all := map[string]wire.NodeResult{"free": result(guard.DecisionDeny, guard.ReasonOutsidePool, "the node is in no pool")}
	for k, v := range byNode {
		all[k] = v
	}
	return script(all, result(guard.DecisionAllow, "", "allowed by policy strict"))
}

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
		name      string
		world     func(w *world)
		pod       *corev1.Pod
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
		name:   "core allow: the tenant's pool nodes pass without a toleration",
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {}, "a2": {}, "free": outside, "g1": mismatch},
		bindTo: "a1", bind: want{}, calls: 2,
	}, {
		name: "core deny: Unschedulable with the reason code",
		world: func(w *world) {
			w.evaluator = acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionDeny, guard.ReasonTimeSlicingForbidden, "time-sliced")})
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {no, "(deny): TIME_SLICING_FORBIDDEN: time-sliced"}, "a2": {}},
		calls:  1,
	}, {
		name: "indeterminate: source not accepted",
		world: func(w *world) {
			w.evaluator = acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionIndeterminate, guard.ReasonSourceNotAccepted, "mock")})
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "(indeterminate): SOURCE_NOT_ACCEPTED"}, "a2": {}},
		calls:  1,
	}, {
		name: "indeterminate: stale evidence",
		world: func(w *world) {
			w.evaluator = acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionIndeterminate, guard.ReasonEvidenceStale, "old")})
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "EVIDENCE_STALE"}},
		calls:  1,
	}, {
		name: "indeterminate: incomplete evidence",
		world: func(w *world) {
			w.evaluator = acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionIndeterminate, guard.ReasonEvidenceIncomplete, "partial")})
		},
		pod:    pod(acmeNS, "train"),
		filter: map[string]want{"a1": {never, "EVIDENCE_INCOMPLETE"}},
		calls:  1,
	}, {
		name: "evaluator timeout refuses every node",
		world: func(w *world) {
			w.evalTimeout = 50 * time.Millisecond
			w.evaluator = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
			})
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_TIMEOUT"}, calls: 1,
	}, {
		name: "evaluator unreachable refuses every node",
		world: func(w *world) {
			w.evaluator = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			})
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_UNAVAILABLE"}, calls: 1,
	}, {
		name: "evaluator non-2xx refuses every node",
		world: func(w *world) {
			w.evaluator = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_ERROR"}, calls: 1,
	}, {
		name: "evaluator garbage refuses every node",
		world: func(w *world) {
			w.evaluator = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"profile":"production","pod":{"decision":"allow"`))
			})
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "EVALUATOR_ERROR"}, calls: 1,
	}, {
		name: "identity unresolved: two bindings list the namespace",
		world: func(w *world) {
			w.bindings = append(w.bindings, tenantBinding(globex, []string{acmeNS}, "strict"))
		},
		pod: pod(acmeNS, "train"), preFilter: want{never, "TENANT_UNRESOLVED"}, calls: 1,
	}, {
		name: "identity unresolved: label contradicts the binding",
		world: func(w *world) {
			w.namespaces = append(w.namespaces, tenantNS("shared", globex))
			w.bindings[0].Spec.Namespaces = append(w.bindings[0].Spec.Namespaces, "shared")
		},
		pod: pod("shared", "train"), preFilter: want{never, "labelled guard.xila.us/tenant=globex but listed by the TenantBinding of tenant acme"}, calls: 1,
	}, {
		name:  "no policy: neither reference nor annotation",
		world: func(w *world) { w.bindings[0].Spec.EffectivePolicyRef = nil },
		pod:   pod(acmeNS, "train"), preFilter: want{never, "NO_POLICY"}, calls: 1,
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
		name: "confinement Any: a node in no pool is allowed",
		world: func(w *world) {
			w.evaluator = acmeScript(map[string]wire.NodeResult{"free": result(guard.DecisionAllow, guard.ReasonUnguardedNode, "no pool")})
		},
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
		name: "PreBind: fresh evidence is now denied",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.eval.set(acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionDeny, guard.ReasonTimeSlicingForbidden, "time-sliced")}))
		},
		bind: want{no, "TIME_SLICING_FORBIDDEN"}, calls: 2,
	}, {
		name: "PreBind: fresh evidence is now stale",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.eval.set(acmeScript(map[string]wire.NodeResult{"a1": result(guard.DecisionIndeterminate, guard.ReasonEvidenceStale, "old")}))
		},
		bind: want{never, "EVIDENCE_STALE"}, calls: 2,
	}, {
		name: "PreBind: evaluator down",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.eval.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }))
		},
		bind: want{never, "EVALUATOR_ERROR"}, calls: 2,
	}, {
		name: "PreBind: the namespace changed tenant",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			must(h.t, h.pl.caches.bindings.Update(tenantBinding(globex, []string{acmeNS}, "strict")))
			must(h.t, h.pl.caches.bindings.Delete(tenantBinding(acme, nil, "")))
		},
		bind: want{never, "TENANT_UNRESOLVED: the tenant or pool of namespace acme-ml changed after the pod was judged"}, calls: 1,
	}, {
		name: "PreBind: policy deleted since Filter",
		pod:  pod(acmeNS, "train"), bindTo: "a1",
		between: func(h *harness) {
			h.guard.remove(placementPolicy("strict", ""))
		},
		bind: want{never, "NO_POLICY"}, calls: 2,
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
			w.evaluator = acmeScript(nil)
			if tc.world != nil {
				tc.world(&w)
			}
			h := w.start(t)
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

// TestPreFilterAsksOncePerCycle checks the snapshot: one call carries the
// tenant's pool with its evidence and one node in no pool, and Filter
// narrows the cycle to the pool.
func TestPreFilterAsksOncePerCycle(t *testing.T) {
	var got []wire.EvaluateRequest
	w := acmeWorld()
	inner := acmeScript(nil)
	w.evaluator = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got = append(got, decodeRequest(t, r))
		inner.ServeHTTP(rw, r)
	})
	h := w.start(t)
	c := h.schedule(pod(acmeNS, "train"))
	if len(got) != 1 {
		t.Fatalf("%d evaluator calls, want 1", len(got))
	}
	req := got[0]
	var names []string
	for _, n := range req.Nodes {
		names = append(names, n.Name)
		if n.Pool == acme && (n.State == nil || n.State.Incarnation != "boot-1" || n.UID != types.UID(n.Name+"-uid")) {
			t.Errorf("node %s sent without its evidence or UID: %+v", n.Name, n)
		}
	}
	slices.Sort(names[:2]) // the pool, in the snapshot's order; the node in no pool comes last
	if strings.Join(names, ",") != "a1,a2,free" {
		t.Errorf("nodes asked about: %v, want a1,a2,free", names)
	}
	if req.Profile != guard.ProfileProduction || req.Tenant.ID != acme || req.Policy.Name != "strict" || req.Pod.Name != "train" {
		t.Errorf("request = %+v", req)
	}
	if c.result == nil || !c.result.NodeNames.Equal(setOf("a1", "a2")) {
		t.Errorf("PreFilterResult = %v, want the pool a1, a2", c.result)
	}
}

// TestPerNodeMode checks the benchmark's naive variant: one call per node
// in Filter, with the same answers.
func TestPerNodeMode(t *testing.T) {
	w := acmeWorld()
	w.perNode = true
	w.evaluator = acmeScript(map[string]wire.NodeResult{"a2": result(guard.DecisionDeny, guard.ReasonMIGForbidden, "MIG")})
	h := w.start(t)
	p := pod(acmeNS, "train")
	c := h.schedule(p)
	check(t, "Filter a1", c.filter["a1"], want{})
	check(t, "Filter a2", c.filter["a2"], want{fwk.Unschedulable, "MIG_FORBIDDEN"})
	check(t, "Filter free", c.filter["free"], want{fwk.UnschedulableAndUnresolvable, "OUTSIDE_POOL"})
	if got := h.eval.calls.Load(); got != 4 {
		t.Errorf("evaluator called %d times, want one per node (4)", got)
	}
	h.guard.put(nodeState(poolNode("a1", acme), "boot-9"))
	check(t, "PreBind a1", h.bind(c, p, "a1"), want{fwk.UnschedulableAndUnresolvable, "NODE_CHANGED"})
}

// TestEvaluatorFailureRetries checks that a pod refused for want of a
// decision is woken again, and that the evaluator is left alone meanwhile.
func TestEvaluatorFailureRetries(t *testing.T) {
	w := acmeWorld()
	w.evaluator = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	p := pod(acmeNS, "train")
	w.pods = []*corev1.Pod{p}
	h := w.start(t)
	check(t, "first PreFilter", h.schedule(p).preFilter, want{fwk.UnschedulableAndUnresolvable, "EVALUATOR_ERROR"})
	check(t, "second PreFilter", h.schedule(p).preFilter, want{fwk.UnschedulableAndUnresolvable, "not asking the evaluator"})
	if got := h.eval.calls.Load(); got != 1 {
		t.Errorf("evaluator called %d times while backing off, want 1", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(h.activated.woken()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := h.activated.woken(); len(got) == 0 || got[0] != acmeNS+"/train" {
		t.Fatalf("woken pods = %v, want %s/train", got, acmeNS)
	}
	h.eval.set(acmeScript(nil))
	time.Sleep(minBackoff)
	check(t, "PreFilter after recovery", h.schedule(p).preFilter, want{})
}

// TestCachesNotSynced refuses every pod, protected or not, until the
// caches can tell which pods are protected.
func TestCachesNotSynced(t *testing.T) {
	h := acmeWorld().start(t)
	h.pl.caches.synced = append(h.pl.caches.synced, func() bool { return false })
	check(t, "PreFilter", h.schedule(pod(plain, "web")).preFilter, want{fwk.Error, "waiting for the caches"})
}
