//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
	"github.com/xila-guard/xila-guard/components/observe/status"
)

// ready returns the Ready condition of conds, or an error naming what is
// missing.
func ready(conds []metav1.Condition) (*metav1.Condition, error) {
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	if c == nil {
		return nil, fmt.Errorf("no Ready condition in %v", conds)
	}
	return c, nil
}

// wantReady checks a Ready condition's status and reason.
func wantReady(conds []metav1.Condition, st metav1.ConditionStatus, reason string) error {
	c, err := ready(conds)
	if err != nil {
		return err
	}
	if c.Status != st || c.Reason != reason {
		return fmt.Errorf("Ready is %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, st, reason)
	}
	return nil
}

// TestIntegrationStatus runs the publisher and the status controller
// against a real API server: each PlacementPolicy, TenantBinding and
// NodeSecurityState tells its state, and the status follows the objects it
// is computed from.
func TestIntegrationStatus(t *testing.T) {
	ctx := context.Background()
	outer := t // what subtests create must outlive them
	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &failing{Evaluator: postbind.Local{Evaluator: eval}}
	startManager(t, func(mgr ctrl.Manager) error {
		if err := (&evidence.Publisher{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&status.Controller{Client: mgr.GetClient(), Evaluator: ev}).SetupWithManager(mgr, 2)
	})
	const policy, tenant, ns = "st-umbrella", "umbrella", "umbrella-train"
	create(t, fixture.MakePlacementPolicy(policy, v1alpha1.SourceNFD).MaxAge(12*time.Second).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj())
	getPolicy := func() (*v1alpha1.PlacementPolicy, error) {
		p := &v1alpha1.PlacementPolicy{}
		return p, k8s.Get(ctx, client.ObjectKey{Name: policy}, p)
	}
	getBinding := func() (*v1alpha1.TenantBinding, error) {
		b := &v1alpha1.TenantBinding{}
		return b, k8s.Get(ctx, client.ObjectKey{Name: tenant}, b)
	}

	t.Run("a policy no binding uses is not Ready, and says how to use it", func(t *testing.T) {
		eventually(t, 10*time.Second, func() error {
			p, err := getPolicy()
			if err != nil {
				return err
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.Bindings != 0 {
				return fmt.Errorf("status %+v", p.Status)
			}
			return wantReady(p.Status.Conditions, metav1.ConditionFalse, status.ReasonUnreferenced)
		})
	})

	t.Run("a binding whose namespace is missing says so; the policy counts it", func(t *testing.T) {
		create(t, fixture.MakeTenantBinding(tenant, ns).Policy(policy).Obj())
		eventually(t, 10*time.Second, func() error {
			b, err := getBinding()
			if err != nil {
				return err
			}
			st := b.Status
			if st.Pool != tenant || st.Policy != policy || !st.PolicyFound || len(st.Namespaces) != 1 || st.Namespaces[0].Exists ||
				st.Namespaces[0].Policy != policy || st.ObservedGeneration != b.Generation {
				return fmt.Errorf("status %+v", st)
			}
			return wantReady(st.Conditions, metav1.ConditionFalse, status.ReasonNamespacesMissing)
		})
		eventually(t, 10*time.Second, func() error {
			p, err := getPolicy()
			if err != nil {
				return err
			}
			if p.Status.Bindings != 1 {
				return fmt.Errorf("bindings %d, want 1", p.Status.Bindings)
			}
			return wantReady(p.Status.Conditions, metav1.ConditionTrue, status.ReasonReferenced)
		})
	})

	t.Run("the namespace created and nodes labelled into the pool make the binding Ready with its nodes", func(t *testing.T) {
		create(t, fixture.MakeNamespace(ns).Obj())
		gpu := map[string]string{guard.LabelTenantPool: tenant, evidence.LabelGPUCount: "1", evidence.LabelSharingStrategy: "none",
			evidence.LabelGFDTimestamp: strconv.FormatInt(time.Now().Unix(), 10)}
		createNode(outer, "st-b", gpu, "b1")
		createNode(outer, "st-a", gpu, "b1")
		eventually(t, 10*time.Second, func() error {
			b, err := getBinding()
			if err != nil {
				return err
			}
			st := b.Status
			if !st.Namespaces[0].Exists || st.PoolNodeCount != 2 || !slices.Equal(st.PoolNodes, []string{"st-a", "st-b"}) {
				return fmt.Errorf("status %+v", st)
			}
			return wantReady(st.Conditions, metav1.ConditionTrue, status.ReasonResolved)
		})
	})

	getState := func(name string) (*v1alpha1.NodeSecurityState, error) {
		s := &v1alpha1.NodeSecurityState{}
		return s, k8s.Get(ctx, client.ObjectKey{Name: name}, s)
	}
	wantEvaluation := func(name string, d guard.Decision, reason guard.Reason) func() error {
		return func() error {
			s, err := getState(name)
			if err != nil {
				return err
			}
			e := s.Status.Evaluation
			if e == nil {
				return fmt.Errorf("state %s has no evaluation; status %+v", name, s.Status)
			}
			if e.TenantID != tenant || e.PolicyName != policy || e.Decision != d || e.Incarnation != s.Spec.Incarnation ||
				(reason != "" && !slices.Contains(e.Reasons, reason)) {
				return fmt.Errorf("state %s evaluated %+v, want %s %s", name, e, d, reason)
			}
			return nil
		}
	}

	t.Run("each node's state carries its evaluation against the pool's policy", func(t *testing.T) {
		eventually(t, 10*time.Second, wantEvaluation("st-a", guard.DecisionAllow, ""))
		eventually(t, 5*time.Second, func() error {
			s, err := getState("st-a")
			if err != nil {
				return err
			}
			return wantReady(s.Status.Conditions, metav1.ConditionTrue, status.ReasonEvidenceCurrent)
		})
		patchNode(t, "st-b", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "time-slicing" })
		eventually(t, 10*time.Second, wantEvaluation("st-b", guard.DecisionDeny, guard.ReasonTimeSlicingForbidden))
	})

	confirm := func(t *testing.T, node string) {
		t.Helper()
		patchNode(t, node, func(n *corev1.Node) {
			n.Labels[evidence.LabelGFDTimestamp] = strconv.FormatInt(time.Now().Unix(), 10)
		})
	}
	t.Run("evidence confirmed again, to the same judgement, is not rewritten", func(t *testing.T) {
		before, err := getState("st-a")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // a newer GFD timestamp, in seconds
		confirm(t, "st-a")
		eventually(t, 10*time.Second, func() error {
			s, err := getState("st-a")
			if err != nil {
				return err
			}
			if !s.Spec.ObservedAt.After(before.Spec.ObservedAt.Time) {
				return fmt.Errorf("observedAt still %s", s.Spec.ObservedAt)
			}
			return nil
		})
		// Give the controller the time to see the new generation.
		time.Sleep(2 * time.Second)
		after, err := getState("st-a")
		if err != nil {
			t.Fatal(err)
		}
		if after.Generation == before.Generation {
			t.Fatalf("generation %d did not move", after.Generation)
		}
		if !after.Status.Evaluation.EvaluatedAt.Equal(&before.Status.Evaluation.EvaluatedAt) || after.Status.ObservedGeneration != before.Status.ObservedGeneration {
			t.Errorf("status rewritten for the same judgement: evaluatedAt %s -> %s, observedGeneration %d -> %d",
				before.Status.Evaluation.EvaluatedAt, after.Status.Evaluation.EvaluatedAt, before.Status.ObservedGeneration, after.Status.ObservedGeneration)
		}
	})

	// touch changes the tenant's namespace, which makes every status be
	// computed again.
	touch := func(t *testing.T, value string) {
		t.Helper()
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		base := n.DeepCopy()
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, "example.com/touch", value)
		if err := k8s.Patch(ctx, n, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("an evaluator that cannot answer is reported indeterminate, and recovers", func(t *testing.T) {
		confirm(t, "st-a")
		eventually(t, 10*time.Second, wantEvaluation("st-a", guard.DecisionAllow, ""))
		// The evaluator is down only until the status says so: the
		// controller's backoff then stays short, far within the evidence's
		// maximum age, however slow the machine. (Counting refusals is not
		// enough: the compliance controller asks the same evaluator, and
		// may be the one refused.) The indeterminate status lasts as long
		// as that backoff, so it is read from a watch.
		before, err := getState("st-a")
		if err != nil {
			t.Fatal(err)
		}
		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		w, err := watcher.Watch(ctx, &v1alpha1.NodeSecurityStateList{}, &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", "st-a"),
			Raw:           &metav1.ListOptions{ResourceVersion: before.ResourceVersion},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev.down.Store(true)
		defer ev.down.Store(false)
		touch(t, "down")
		var seen []string
		want := []guard.Decision{guard.DecisionIndeterminate, guard.DecisionAllow}
		timeout := time.After(20 * time.Second)
		for len(want) > 0 {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch closed; evaluations seen %v", seen)
				}
				s, ok := e.Object.(*v1alpha1.NodeSecurityState)
				if !ok || s.Status.Evaluation == nil {
					continue
				}
				ev2 := s.Status.Evaluation
				seen = append(seen, fmt.Sprintf("%s%v", ev2.Decision, ev2.Reasons))
				if ev2.Decision == want[0] && (ev2.Decision != guard.DecisionIndeterminate || slices.Contains(ev2.Reasons, guard.ReasonEvaluatorError)) {
					want = want[1:]
					// Back up, with no change: the controller asks
					// again by itself.
					ev.down.Store(false)
				}
			case <-timeout:
				t.Fatalf("after 20s: evaluations seen %v, still waiting for %v", seen, want)
			}
		}
		eventually(t, 5*time.Second, wantEvaluation("st-a", guard.DecisionAllow, ""))
	})

	t.Run("stale evidence turns Ready false at maxAge, with the evaluation", func(t *testing.T) {
		eventually(t, 20*time.Second, func() error {
			s, err := getState("st-a")
			if err != nil {
				return err
			}
			if err := wantReady(s.Status.Conditions, metav1.ConditionFalse, status.ReasonEvidenceStale); err != nil {
				return err
			}
			return wantEvaluation("st-a", guard.DecisionIndeterminate, guard.ReasonEvidenceStale)()
		})
	})

	t.Run("a deleted policy leaves the binding not Ready and the node judged without one", func(t *testing.T) {
		if err := k8s.Delete(ctx, &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() error {
			b, err := getBinding()
			if err != nil {
				return err
			}
			if b.Status.PolicyFound {
				return fmt.Errorf("status %+v", b.Status)
			}
			return wantReady(b.Status.Conditions, metav1.ConditionFalse, status.ReasonPolicyNotFound)
		})
		eventually(t, 10*time.Second, func() error {
			s, err := getState("st-b")
			if err != nil {
				return err
			}
			e := s.Status.Evaluation
			if e == nil || e.PolicyName != "" || e.Decision == guard.DecisionAllow || !slices.Contains(e.Reasons, guard.ReasonNoPolicy) {
				return fmt.Errorf("evaluation %+v, want a refusal for NO_POLICY", e)
			}
			return nil
		})
	})
}
