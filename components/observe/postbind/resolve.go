package postbind

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// indexBindingNamespace indexes TenantBindings by the namespaces they list.
const indexBindingNamespace = "spec.namespaces"

// identity is a pod's tenant and policy, as the evaluator takes them.
type identity struct {
	protected bool
	tenant    *wire.Tenant
	policy    *wire.Policy
}

// resolve decides a namespace's tenant and policy with the scheduler's
// rules: the TenantBinding that lists the namespace is authoritative; a
// namespace that is only labelled belongs to the labelled tenant, whose
// binding (named after it) supplies pool and policy; two bindings, or a
// label that contradicts the binding, leave the tenant unresolved. The
// policy is the binding's effectivePolicyRef, else the namespace's
// guard.xila.us/policy annotation. What a missing tenant or policy means is
// the evaluator's to decide.
func resolve(ctx context.Context, r client.Reader, ns *corev1.Namespace) (identity, error) {
	var list v1alpha1.TenantBindingList
	if err := r.List(ctx, &list, client.MatchingFields{indexBindingNamespace: ns.Name}); err != nil {
		return identity{}, fmt.Errorf("listing the TenantBindings of namespace %s: %w", ns.Name, err)
	}
	label, labelled := ns.Labels[guard.LabelTenant]
	if !labelled && len(list.Items) == 0 {
		return identity{}, nil
	}
	id := identity{protected: true}
	var b *v1alpha1.TenantBinding
	switch {
	case len(list.Items) > 1:
		return id, nil
	case len(list.Items) == 1 && labelled && list.Items[0].Spec.TenantID != label:
		return id, nil
	case len(list.Items) == 1:
		b = &list.Items[0]
	case label == "":
		return id, nil
	default:
		b = &v1alpha1.TenantBinding{}
		if err := r.Get(ctx, client.ObjectKey{Name: label}, b); apierrors.IsNotFound(err) {
			b = nil
		} else if err != nil {
			return identity{}, fmt.Errorf("reading TenantBinding %s: %w", label, err)
		}
	}
	if b != nil {
		id.tenant = &wire.Tenant{ID: b.Spec.TenantID, Pool: b.Spec.Pool()}
	} else {
		id.tenant = &wire.Tenant{ID: label}
	}
	name := ns.Annotations[guard.AnnotationPolicy]
	if b != nil && b.Spec.EffectivePolicyRef != nil && b.Spec.EffectivePolicyRef.Name != "" {
		name = b.Spec.EffectivePolicyRef.Name
	}
	if name == "" {
		return id, nil
	}
	p := &v1alpha1.PlacementPolicy{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, p); apierrors.IsNotFound(err) {
		return id, nil
	} else if err != nil {
		return identity{}, fmt.Errorf("reading PlacementPolicy %s: %w", name, err)
	}
	id.policy = &wire.Policy{Name: p.Name, Spec: p.Spec}
	return id, nil
}
