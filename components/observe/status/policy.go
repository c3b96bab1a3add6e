package status

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// reconcilePolicy brings one PlacementPolicy's status up to date: Ready
// and the number of TenantBindings whose namespaces resolve to it.
func (c *Controller) reconcilePolicy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.PlacementPolicy{}
	if err := c.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading PlacementPolicy %s: %w", req.Name, err)
	}
	w, err := newWorld(ctx, c.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	var bound []string
	for i := range w.Bindings {
		nss, err := w.namespaces(&w.Bindings[i])
		if err != nil {
			return reconcile.Result{}, err
		}
		if slices.Contains(policyNames(nss), p.Name) {
			bound = append(bound, w.Bindings[i].Name)
		}
	}
	slices.Sort(bound)
	base := p.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	p.Status.Bindings = int32(len(bound))
	setReady(&p.Status.Conditions, policyReady(p, bound), p.Generation, c.now())
	if equality.Semantic.DeepEqual(base.Status, p.Status) {
		return reconcile.Result{}, nil
	}
	if err := c.Client.Status().Patch(ctx, p, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of PlacementPolicy %s: %w", p.Name, err)
	}
	return reconcile.Result{}, nil
}
