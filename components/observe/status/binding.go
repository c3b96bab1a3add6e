package status

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// reconcileBinding brings one TenantBinding's status up to date: its
// namespaces and what they resolve to, its pool's nodes and Ready.
func (c *Controller) reconcileBinding(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &v1alpha1.TenantBinding{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading TenantBinding %s: %w", req.Name, err)
	}
	w, err := newWorld(ctx, c.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	nss, err := w.namespaces(b)
	if err != nil {
		return reconcile.Result{}, err
	}
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.MatchingLabels{guard.LabelTenantPool: b.Spec.Pool()}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the nodes of pool %s: %w", b.Spec.Pool(), err)
	}
	base := b.DeepCopy()
	bindingStatus(b, nss, nodes.Items)
	setReady(&b.Status.Conditions, bindingReady(b, nss), b.Generation, c.now())
	if equality.Semantic.DeepEqual(base.Status, b.Status) {
		return reconcile.Result{}, nil
	}
	if err := c.Client.Status().Patch(ctx, b, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of TenantBinding %s: %w", b.Name, err)
	}
	return reconcile.Result{}, nil
}

// bindingStatus sets every status field of the binding but its
// conditions, from its resolved namespaces and its pool's nodes.
func bindingStatus(b *v1alpha1.TenantBinding, nss []namespaceState, nodes []corev1.Node) {
	st := &b.Status
	st.ObservedGeneration = b.Generation
	st.Pool = b.Spec.Pool()
	st.PolicyFound = len(nss) > 0
	st.Namespaces = make([]v1alpha1.BindingNamespace, len(nss))
	for i, ns := range nss {
		st.Namespaces[i] = v1alpha1.BindingNamespace{Name: ns.name, Exists: ns.exists}
		if p := ns.id.Policy; p != nil {
			st.Namespaces[i].Policy = p.Name
		} else {
			st.PolicyFound = false
		}
	}
	st.Policy = ""
	if ref := b.Spec.EffectivePolicyRef; ref != nil && ref.Name != "" {
		st.Policy = ref.Name
	} else if ps := policyNames(nss); len(ps) == 1 && st.PolicyFound {
		st.Policy = ps[0]
	}
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	slices.Sort(names)
	st.PoolNodeCount = int32(len(names))
	st.PoolNodes = nil
	if len(names) > 0 {
		st.PoolNodes = names[:min(len(names), v1alpha1.MaxPoolNodes)]
	}
}
