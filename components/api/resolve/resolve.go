package resolve

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Lookup reads the guard objects that resolution needs. A missing object
// is nil with a nil error; an error means the object could not be read.
type Lookup interface {
	// Listing returns the TenantBindings that list the namespace.
	Listing(namespace string) ([]*v1alpha1.TenantBinding, error)
	// PlacementPolicy returns the named PlacementPolicy.
	PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error)
}

// Identity is who a namespace's pods belong to and which policy applies:
// what the evaluator needs besides the nodes. The evaluator decides what a
// missing tenant or policy means; Note only explains why one is missing.
type Identity struct {
	// Protected is true when the namespace carries the tenant label or is
	// listed by a TenantBinding.
	Protected bool
	// Tenant is nil when the tenant of a protected namespace could not be
	// resolved.
	Tenant *Tenant
	// Policy is nil when no PlacementPolicy applies.
	Policy *v1alpha1.PlacementPolicy
	// Note says why the tenant or the policy is missing.
	Note string
}

// Tenant is a resolved tenant.
type Tenant struct {
	// ID is the tenant's ID.
	ID string
	// Pool is the pool of the tenant's TenantBinding; empty when the tenant
	// has none, and then the pool is named after the tenant.
	Pool string
}

// Namespace decides a namespace's tenant and policy.
//
// The TenantBinding that lists the namespace is the only source of its
// tenant. A namespace that carries the tenant label but that no binding
// lists is protected, and its tenant is unresolved: whoever can create or
// label a namespace must not become a tenant by naming one. Two bindings
// listing one namespace, or a label that contradicts the binding, leave the
// tenant unresolved too: guessing would open one tenant's pool to
// another's pods. The policy is the binding's effectivePolicyRef, else the
// namespace's guard.xila.us/policy annotation.
//
// ns is the namespace, typically a *corev1.Namespace. Errors are the
// Lookup's, returned as they are.
func Namespace(ns metav1.Object, l Lookup) (Identity, error) {
	listing, err := l.Listing(ns.GetName())
	if err != nil {
		return Identity{}, err
	}
	label, labelled := ns.GetLabels()[guard.LabelTenant]
	if !labelled && len(listing) == 0 {
		return Identity{}, nil
	}
	id := Identity{Protected: true}
	switch {
	case len(listing) > 1:
		names := make([]string, len(listing))
		for i, lb := range listing {
			names[i] = lb.Name
		}
		slices.Sort(names)
		id.Note = fmt.Sprintf("namespace %s is listed by several TenantBindings (%s)", ns.GetName(), strings.Join(names, ", "))
		return id, nil
	case len(listing) == 0:
		id.Note = fmt.Sprintf("namespace %s is labelled %s=%s but no TenantBinding lists it; only a TenantBinding's namespaces name a tenant",
			ns.GetName(), guard.LabelTenant, label)
		return id, nil
	case labelled && listing[0].Spec.TenantID != label:
		id.Note = fmt.Sprintf("namespace %s is labelled %s=%s but listed by the TenantBinding of tenant %s",
			ns.GetName(), guard.LabelTenant, label, listing[0].Spec.TenantID)
		return id, nil
	}
	b := listing[0]
	id.Tenant = &Tenant{ID: b.Spec.TenantID, Pool: b.Spec.Pool()}
	name, source := policyName(b, ns)
	if name == "" {
		id.Note = "TenantBinding " + b.Name + " has no effectivePolicyRef and the namespace no " + guard.AnnotationPolicy + " annotation"
		return id, nil
	}
	p, err := l.PlacementPolicy(name)
	if err != nil {
		return Identity{}, err
	}
	if p == nil {
		id.Note = fmt.Sprintf("PlacementPolicy %s, named by %s, does not exist", name, source)
		return id, nil
	}
	id.Policy = p
	return id, nil
}

// policyName returns the name of the policy that applies and where it came
// from: the binding's effectivePolicyRef, or else the namespace annotation.
func policyName(b *v1alpha1.TenantBinding, ns metav1.Object) (name, source string) {
	if b.Spec.EffectivePolicyRef != nil && b.Spec.EffectivePolicyRef.Name != "" {
		return b.Spec.EffectivePolicyRef.Name, "TenantBinding " + b.Name
	}
	return ns.GetAnnotations()[guard.AnnotationPolicy], "the " + guard.AnnotationPolicy + " annotation of namespace " + ns.GetName()
}
