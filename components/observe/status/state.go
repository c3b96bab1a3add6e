package status

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// reconcileState brings one NodeSecurityState's status up to date: Ready
// (the evidence is about the node of its name, complete and fresh for the
// policy of the node's pool) and the evaluation of the node against that
// policy. The status is written only when the judgement changes, so an
// evidence refresh that confirms the same facts writes nothing; its
// observedGeneration is the generation at which it was last written.
func (c *Controller) reconcileState(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &v1alpha1.NodeSecurityState{}
	if err := c.Client.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading NodeSecurityState %s: %w", req.Name, err)
	}
	var nodeUID types.UID
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: s.Name}, node); err == nil {
		nodeUID = node.UID
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", s.Name, err)
	}
	w, err := newWorld(ctx, c.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	sub, err := w.subject(node.Labels[guard.LabelTenantPool])
	if err != nil {
		return reconcile.Result{}, err
	}
	now := c.now()
	maxAge := v1alpha1.DefaultMaxEvidenceAge
	if sub != nil && sub.policy != nil && sub.policy.Spec.Evidence.MaxAge != nil {
		maxAge = sub.policy.Spec.Evidence.MaxAge.Duration
	}
	var evalErr error
	base := s.DeepCopy()
	s.Status.Evaluation, evalErr = c.evaluate(ctx, s, sub, now)
	if old := base.Status.Evaluation; old != nil && s.Status.Evaluation != nil && sameJudgement(old, s.Status.Evaluation) {
		s.Status.Evaluation.EvaluatedAt = old.EvaluatedAt
	}
	setReady(&s.Status.Conditions, stateReady(&s.Spec, s.Name, nodeUID, maxAge, now), base.Status.ObservedGeneration, now)
	if !equality.Semantic.DeepEqual(base.Status, s.Status) {
		s.Status.ObservedGeneration = s.Generation
		setReady(&s.Status.Conditions, stateReady(&s.Spec, s.Name, nodeUID, maxAge, now), s.Generation, now)
		if err := c.Client.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the status of NodeSecurityState %s: %w", s.Name, err)
		}
	}
	if evalErr != nil {
		// Reported as indeterminate; asked again with the controller's
		// backoff, at most backoff.Max later.
		return reconcile.Result{}, evalErr
	}
	// Look again just after the evidence outlives its maximum age.
	if until := s.Spec.ObservedAt.Add(maxAge).Sub(now) + time.Second; until > 0 {
		return reconcile.Result{RequeueAfter: until}, nil
	}
	return reconcile.Result{}, nil
}

// subject is the tenant a node's pool belongs to, and the namespace and
// policy its pods are judged under.
type subject struct {
	binding   *v1alpha1.TenantBinding
	namespace string
	tenant    *resolve.Tenant
	policy    *v1alpha1.PlacementPolicy
}

// subject returns what the nodes of the pool are judged against: the one
// binding that owns the pool and its first namespace that resolves to it;
// nil when the pool has no single owner or the owner lists no namespace.
func (w world) subject(pool string) (*subject, error) {
	owners := w.owners(pool)
	if len(owners) != 1 {
		return nil, nil
	}
	b := owners[0]
	nss, err := w.namespaces(b)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(nss, func(ns namespaceState) bool {
		return ns.id.Tenant != nil && ns.id.Tenant.ID == b.Spec.TenantID && ns.id.Policy != nil
	})
	if i < 0 {
		i = slices.IndexFunc(nss, func(ns namespaceState) bool { return ns.id.Tenant != nil && ns.id.Tenant.ID == b.Spec.TenantID })
	}
	if i < 0 {
		return nil, nil
	}
	return &subject{binding: b, namespace: nss[i].name, tenant: nss[i].id.Tenant, policy: nss[i].id.Policy}, nil
}

// evaluate judges the state's node against the subject's policy, as a pod
// of its namespace would be judged there now. An evaluator error is
// reported as the indeterminate decision the enforcement points take in
// its place, and returned.
func (c *Controller) evaluate(ctx context.Context, s *v1alpha1.NodeSecurityState, sub *subject, now time.Time) (*v1alpha1.NodeEvaluation, error) {
	if sub == nil {
		return nil, nil
	}
	candidate, err := postbind.Candidate(ctx, c.Client, s.Name)
	if err != nil {
		return nil, err
	}
	res, evalErr := c.Evaluator.Evaluate(ctx, &wire.EvaluateRequest{Profile: c.Profile, Pod: wire.Pod{Namespace: sub.namespace},
		Tenant: wire.TenantOf(sub.tenant), Policy: wire.PolicyOf(sub.policy), Nodes: []wire.Node{candidate}})
	if evalErr != nil {
		res = postbind.Failure(s.Name, evalErr)
	}
	e := &v1alpha1.NodeEvaluation{TenantID: sub.binding.Spec.TenantID, Decision: res.Decision,
		Reasons: slices.Clone(res.Reasons), Incarnation: s.Spec.Incarnation, EvaluatedAt: metav1.NewTime(now)}
	if sub.policy != nil {
		e.PolicyName = sub.policy.Name
	}
	if len(e.Reasons) > maxReasons {
		e.Reasons = e.Reasons[:maxReasons]
	}
	return e, evalErr
}

// maxReasons is the most reason codes an evaluation holds (the API's
// bound).
const maxReasons = 32

// sameJudgement reports whether two evaluations reach the same judgement,
// whenever they were made.
func sameJudgement(a, b *v1alpha1.NodeEvaluation) bool {
	return a.TenantID == b.TenantID && a.PolicyName == b.PolicyName && a.Decision == b.Decision &&
		slices.Equal(a.Reasons, b.Reasons) && a.Incarnation == b.Incarnation
}
