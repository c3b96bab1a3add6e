package postbind

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

// indexPodNode indexes pods by the node they are bound to.
const indexPodNode = "spec.nodeName"

// SetupWithManager registers the reconciler. Besides pods, it watches what a
// decision depends on: a NodeSecurityState or Node change re-evaluates the
// pods on that node (drift), a TenantBinding or Namespace change the pods
// of the namespaces concerned. Workers bounds concurrent evaluations.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, workers int) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexPodNode, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.TenantBinding{}, indexBindingNamespace, func(o client.Object) []string {
		return o.(*v1alpha1.TenantBinding).Spec.Namespaces
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("post-binding").
		For(&corev1.Pod{}).
		Watches(&v1alpha1.NodeSecurityState{}, r.podsOnNode(c)).
		Watches(&corev1.Node{}, r.podsOnNode(c), builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, gpuOfferChanged))).
		Watches(&v1alpha1.TenantBinding{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return podsIn(ctx, c, o.(*v1alpha1.TenantBinding).Spec.Namespaces...)
		})).
		Watches(&v1alpha1.PlacementPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return podsIn(ctx, c, namespacesUsing(ctx, c, o.GetName())...)
		})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return podsIn(ctx, c, o.GetName())
		}), builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1), RateLimiter: backoff.RateLimiter()}).
		Complete(r)
}

// gpuOfferChanged passes a Node update that changes how many GPUs the node
// offers pods, which the evaluator checks against the node's evidence.
var gpuOfferChanged = predicate.Funcs{UpdateFunc: func(e crevent.UpdateEvent) bool {
	before, okBefore := e.ObjectOld.(*corev1.Node)
	after, okAfter := e.ObjectNew.(*corev1.Node)
	return okBefore && okAfter &&
		!guard.SameGPUOffer(before.Status.Allocatable, after.Status.Allocatable)
}}

// podsOnNode maps an object named after a node to the pods bound to it.
func (r *Reconciler) podsOnNode(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.MatchingFields{indexPodNode: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing the pods of a node", "node", o.GetName())
			return nil
		}
		return requests(pods.Items)
	})
}

// podsIn returns requests for every pod of the namespaces.
func podsIn(ctx context.Context, c client.Reader, namespaces ...string) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespaces {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			log.FromContext(ctx).Error(err, "listing the pods of a namespace", "namespace", ns)
			continue
		}
		out = append(out, requests(pods.Items)...)
	}
	return out
}

func requests(pods []corev1.Pod) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(pods))
	for i := range pods {
		if bound(&pods[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pods[i].Namespace, Name: pods[i].Name}})
		}
	}
	return out
}

// namespacesUsing returns the namespaces whose pods may be judged by the
// named policy: those listed by a binding that refers to it, and those that
// name it in their policy annotation.
func namespacesUsing(ctx context.Context, c client.Reader, policy string) []string {
	var out []string
	var bindings v1alpha1.TenantBindingList
	if err := c.List(ctx, &bindings); err != nil {
		log.FromContext(ctx).Error(err, "listing TenantBindings", "policy", policy)
	}
	for _, b := range bindings.Items {
		if ref := b.Spec.EffectivePolicyRef; ref != nil && ref.Name == policy {
			out = append(out, b.Spec.Namespaces...)
		}
	}
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err != nil {
		log.FromContext(ctx).Error(err, "listing namespaces", "policy", policy)
	}
	for _, ns := range namespaces.Items {
		if ns.Annotations[guard.AnnotationPolicy] == policy && !slices.Contains(out, ns.Name) {
			out = append(out, ns.Name)
		}
	}
	return out
}
