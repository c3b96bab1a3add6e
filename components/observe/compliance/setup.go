package compliance

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
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
)

// SetupWithManager registers the labeller. Besides nodes, it watches what
// a decision depends on: a NodeSecurityState recomputes its node; a
// TenantBinding, PlacementPolicy or Namespace change recomputes every node,
// since it can change which policies apply to which pools. Workers bounds
// concurrent reconciles.
func (l *Labeller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	c := mgr.GetClient()
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return AllNodes(ctx, c)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("compliance-labels").
		For(&corev1.Node{}, builder.WithPredicates(nodeInputChanged)).
		Watches(&v1alpha1.NodeSecurityState{}, &handler.EnqueueRequestForObject{}).
		Watches(&v1alpha1.TenantBinding{}, all).
		Watches(&v1alpha1.PlacementPolicy{}, all).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1), RateLimiter: backoff.RateLimiter()}).
		Complete(l)
}

// nodeInputChanged passes node creations, deletions and the updates that
// can change a decision or the labels themselves: the node's labels (the
// pool label; a compliance label someone else changed is put right), its
// UID, and how many GPUs it offers. Heartbeats pass nothing.
var nodeInputChanged = predicate.Funcs{UpdateFunc: func(e crevent.UpdateEvent) bool {
	before, okBefore := e.ObjectOld.(*corev1.Node)
	after, okAfter := e.ObjectNew.(*corev1.Node)
	if !okBefore || !okAfter {
		return true
	}
	return !maps.Equal(before.Labels, after.Labels) || before.UID != after.UID ||
		!guard.SameGPUOffer(before.Status.Allocatable, after.Status.Allocatable)
}}

// AllNodes returns a request for every node.
func AllNodes(ctx context.Context, c client.Reader) []reconcile.Request {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		log.FromContext(ctx).Error(err, "listing nodes")
		return nil
	}
	out := make([]reconcile.Request, len(nodes.Items))
	for i := range nodes.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: nodes.Items[i].Name}}
	}
	return out
}
