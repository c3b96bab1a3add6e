package status

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/internal/backoff"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// +kubebuilder:rbac:groups=guard.xila.us,resources=placementpolicies/status;tenantbindings/status;nodesecuritystates/status,verbs=get;patch;update

// DefaultResync is how often every status is recomputed when nothing it
// depends on changed; evidence going stale is also caught when its maximum
// age runs out.
const DefaultResync = 5 * time.Minute

// Controller keeps the status of PlacementPolicies, TenantBindings and
// NodeSecurityStates.
type Controller struct {
	// Client reads the guard objects, namespaces and nodes through the
	// manager's cache, and writes the status subresources.
	Client client.Client
	// Evaluator judges a node against its pool's policy for the
	// NodeSecurityState's evaluation; the observe controller's.
	Evaluator postbind.Evaluator
	// Profile is asked of the evaluator; empty means the evaluator's own.
	Profile guard.Profile
	// Resync recomputes every status on this period; DefaultResync when
	// zero.
	Resync time.Duration
	// Clock defaults to the system clock.
	Clock clock.PassiveClock
}

// SetupWithManager registers one controller per kind. Each watches what
// its status is computed from: a TenantBinding's or Namespace's change can
// change which policy every binding, pool and node resolves to, so it
// recomputes every object of the kind; a node's pool label recomputes the
// bindings (their pool nodes) and its own state.
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	opts := controller.Options{MaxConcurrentReconciles: max(workers, 1), RateLimiter: backoff.RateLimiter()}
	r := mgr.GetClient()
	allPolicies := all(r, &v1alpha1.PlacementPolicyList{})
	allBindings := all(r, &v1alpha1.TenantBindingList{})
	allStates := all(r, &v1alpha1.NodeSecurityStateList{})
	nsChanged := builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	if err := ctrl.NewControllerManagedBy(mgr).Named("placementpolicy-status").
		For(&v1alpha1.PlacementPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.TenantBinding{}, allPolicies, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, allPolicies, nsChanged).
		WithOptions(opts).
		Complete(c.resynced(c.reconcilePolicy)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("tenantbinding-status").
		For(&v1alpha1.TenantBinding{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.PlacementPolicy{}, allBindings, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, allBindings).
		Watches(&corev1.Node{}, allBindings, builder.WithPredicates(poolChanged)).
		WithOptions(opts).
		Complete(c.resynced(c.reconcileBinding)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("nodesecuritystate-status").
		For(&v1alpha1.NodeSecurityState{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(nodeChanged)).
		Watches(&v1alpha1.TenantBinding{}, allStates, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.PlacementPolicy{}, allStates, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, allStates, nsChanged).
		WithOptions(opts).
		Complete(c.resynced(c.reconcileState))
}

// resynced requeues every successful reconcile within the resync period.
func (c *Controller) resynced(f reconcile.Func) reconcile.Func {
	return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := f(ctx, req)
		if err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > c.resync()) {
			res.RequeueAfter = c.resync()
		}
		return res, err
	}
}

// poolChanged passes node creations, deletions and the updates that move a
// node between pools.
var poolChanged = predicate.Funcs{UpdateFunc: func(e crevent.UpdateEvent) bool {
	return e.ObjectOld.GetLabels()[guard.LabelTenantPool] != e.ObjectNew.GetLabels()[guard.LabelTenantPool]
}}

// nodeChanged passes what a node's state's status reads of it: its pool,
// UID and GPUs on offer. Heartbeats pass nothing.
var nodeChanged = predicate.Funcs{UpdateFunc: func(e crevent.UpdateEvent) bool {
	before, okBefore := e.ObjectOld.(*corev1.Node)
	after, okAfter := e.ObjectNew.(*corev1.Node)
	if !okBefore || !okAfter {
		return true
	}
	return before.Labels[guard.LabelTenantPool] != after.Labels[guard.LabelTenantPool] || before.UID != after.UID ||
		!guard.SameGPUOffer(before.Status.Allocatable, after.Status.Allocatable)
}}

// all maps any event to a request for every object of the list's kind.
func all[L client.ObjectList](r client.Reader, list L) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := r.List(ctx, l); err != nil {
			log.FromContext(ctx).Error(err, "listing objects whose status to recompute")
			return nil
		}
		var out []reconcile.Request
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			if m, ok := o.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: m.GetName()}})
			}
			return nil
		})
		return out
	})
}

func (c *Controller) resync() time.Duration {
	if c.Resync <= 0 {
		return DefaultResync
	}
	return c.Resync
}

func (c *Controller) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}
