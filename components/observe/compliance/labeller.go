// Package compliance keeps one node label per PlacementPolicy that says
// whether the policy allows its tenants' pods on the node now:
// compliance.guard.xila.us/<policy>=true, absent otherwise.
//
// The controlled scheduler judges every node in Filter, but an external
// scheduler (Volcano, KAI, run:ai) chooses a node first, and its binding is
// judged only when it is made (the webhook's bind-time judgement). A pod
// whose node affinity requires its policy's compliance label lets such a
// scheduler choose among the nodes that would pass, instead of learning it
// from refused bindings. The label is a hint that is kept current, never
// a decision: the bind-time judgement stays the backstop, and the label is
// removed when the evaluator cannot answer.
package compliance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// DefaultResync is how often a node's labels are recomputed when nothing
// they depend on changed; evidence going stale is also caught at the
// moment its maxAge runs out.
const DefaultResync = time.Minute

// Observer is told about label changes; metrics implement it.
type Observer interface {
	// ComplianceChanged is called when a node gains (compliant) or loses a
	// policy's compliance label.
	ComplianceChanged(policy string, compliant bool)
}

// Labeller reconciles the compliance labels of one node.
type Labeller struct {
	// Client reads nodes, states, namespaces and the Xila Guard objects,
	// and patches nodes.
	Client client.Client
	// Evaluator decides; the observe controller's, in-process or remote.
	Evaluator postbind.Evaluator
	// Profile is asked of the evaluator; empty means the evaluator's own.
	Profile guard.Profile
	// Observer, when set, is told about label changes.
	Observer Observer
	// Resync recomputes every node on this period; DefaultResync when zero.
	Resync time.Duration
	// Clock defaults to the system clock.
	Clock clock.PassiveClock
}

var _ reconcile.Reconciler = &Labeller{}

// Reconcile brings one node's compliance labels in step with the
// evaluator's decisions for the policies that may place pods on it.
func (l *Labeller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := l.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	subjects, err := PoolSubjects(ctx, l.Client, node.Labels[guard.LabelTenantPool])
	if err != nil {
		return reconcile.Result{}, err
	}
	candidate, err := postbind.Candidate(ctx, l.Client, node.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := map[string]string{}
	var evalErr error
	for _, name := range slices.Sorted(maps.Keys(subjects)) {
		key := guard.ComplianceLabelPrefix + name
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			log.FromContext(ctx).Info("PlacementPolicy name does not fit a label key; no compliance label", "policy", name, "problems", strings.Join(errs, "; "))
			continue
		}
		ok, err := l.allowed(ctx, subjects[name], candidate)
		if err != nil {
			evalErr = err
		}
		if ok {
			want[key] = guard.ComplianceLabelValue
		}
	}
	if err := l.apply(ctx, node, want); err != nil {
		return reconcile.Result{}, err
	}
	if evalErr != nil {
		// The labels the evaluator could not confirm are gone; retry with
		// the controller's backoff.
		return reconcile.Result{}, evalErr
	}
	return reconcile.Result{RequeueAfter: l.next(subjects, candidate)}, nil
}

// Subject is a tenant whose pods a policy judges, with a namespace of its.
type Subject struct {
	Namespace string
	Tenant    *wire.Tenant
	Policy    *wire.Policy
}

// PoolSubjects returns, by policy name, the tenants whose pods the policy
// judges and that may use a node of the pool (every tenant when the node
// is in no pool). Tenants and policies are resolved with the rules every
// component shares, so a namespace annotation names a policy only where a
// binding lets it.
func PoolSubjects(ctx context.Context, c client.Reader, pool string) (map[string][]Subject, error) {
	lookup, err := resolve.ListBindings(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string][]Subject{}
	seen := map[[2]string]bool{}
	for i := range lookup.Bindings {
		b := &lookup.Bindings[i]
		if pool != "" && b.Spec.Pool() != pool {
			continue
		}
		for _, name := range b.Spec.Namespaces {
			// A namespace that does not exist yet: its pods, once it does,
			// answer to the binding's policy.
			ns, _, err := lookup.Namespace(name)
			if err != nil {
				return nil, err
			}
			id, err := resolve.Namespace(ns, lookup)
			if err != nil {
				return nil, err
			}
			if id.Tenant == nil || id.Policy == nil {
				continue
			}
			k := [2]string{id.Tenant.ID, id.Policy.Name}
			if seen[k] {
				continue
			}
			seen[k] = true
			out[id.Policy.Name] = append(out[id.Policy.Name], Subject{Namespace: name, Tenant: wire.TenantOf(id.Tenant), Policy: wire.PolicyOf(id.Policy)})
		}
	}
	return out, nil
}

// allowed reports whether the policy allows every one of its tenants on
// the node. An evaluator error is a refusal, and is returned too.
func (l *Labeller) allowed(ctx context.Context, subjects []Subject, candidate wire.Node) (bool, error) {
	for _, s := range subjects {
		res, err := l.Evaluator.Evaluate(ctx, &wire.EvaluateRequest{Profile: l.Profile,
			Pod: wire.Pod{Namespace: s.Namespace}, Tenant: s.Tenant, Policy: s.Policy, Nodes: []wire.Node{candidate}})
		if err != nil {
			return false, fmt.Errorf("evaluating policy %s on node %s: %w", s.Policy.Name, candidate.Name, err)
		}
		if res.Decision != guard.DecisionAllow {
			return false, nil
		}
	}
	return true, nil
}

// apply patches the node's compliance labels to want, leaving every other
// label alone.
func (l *Labeller) apply(ctx context.Context, node *corev1.Node, want map[string]string) error {
	base := node.DeepCopy()
	changed := false
	for k, v := range node.Labels {
		if strings.HasPrefix(k, guard.ComplianceLabelPrefix) && want[k] != v {
			delete(node.Labels, k)
			changed = true
			l.observe(k, false)
		}
	}
	for k, v := range want {
		if _, ok := node.Labels[k]; !ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			changed = true
			l.observe(k, true)
		}
	}
	if !changed {
		return nil
	}
	if err := l.Client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("labelling node %s: %w", node.Name, err)
	}
	return nil
}

func (l *Labeller) observe(key string, compliant bool) {
	if l.Observer != nil {
		l.Observer.ComplianceChanged(strings.TrimPrefix(key, guard.ComplianceLabelPrefix), compliant)
	}
}

// next returns when to look at the node again: at the resync period, or
// just after its evidence outlives the shortest maxAge of the policies,
// whichever is sooner.
func (l *Labeller) next(subjects map[string][]Subject, candidate wire.Node) time.Duration {
	after := l.Resync
	if after <= 0 {
		after = DefaultResync
	}
	if candidate.State == nil || candidate.State.ObservedAt.IsZero() {
		return after
	}
	now := time.Now()
	if l.Clock != nil {
		now = l.Clock.Now()
	}
	for _, ss := range subjects {
		maxAge := v1alpha1.DefaultMaxEvidenceAge
		if e := ss[0].Policy.Spec.Evidence; e.MaxAge != nil {
			maxAge = e.MaxAge.Duration
		}
		if until := candidate.State.ObservedAt.Add(maxAge).Sub(now) + time.Second; until > 0 && until < after {
			after = until
		}
	}
	return after
}
