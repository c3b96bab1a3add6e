package enforcement

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// identity is who a pod belongs to and which policy applies: what the
// evaluator needs besides the nodes. The evaluator decides what a missing
// tenant or policy means; the notes only explain why one is missing.
type identity struct {
	// protected is true when the pod's namespace carries the tenant label or
	// is listed by a TenantBinding.
	protected bool
	// tenant is nil when the tenant could not be resolved.
	tenant *wire.Tenant
	// policy is nil when no PlacementPolicy applies.
	policy *wire.Policy
	// policyVersion is the policy's resourceVersion, for answer reuse.
	policyVersion string
	// note says why the tenant or the policy is missing.
	note string
}

// pool returns the tenant's pool label value, or "" when the tenant is
// unresolved.
func (id *identity) pool() string {
	if id.tenant == nil {
		return ""
	}
	return id.tenant.PoolName()
}

// resolveIdentity decides a namespace's tenant and policy. listing holds
// the TenantBindings that list the namespace; bindingNamed and policyNamed
// look objects up by name and return nil when there is none.
//
// The TenantBinding that lists the namespace is authoritative. A namespace
// that is only labelled belongs to the labelled tenant, whose TenantBinding
// (named after the tenant) still supplies the pool and the policy. Two
// bindings listing one namespace, or a label that contradicts the binding,
// leave the tenant unresolved: guessing would open one tenant's pool to
// another's pods.
func resolveIdentity(ns *corev1.Namespace, listing []*v1alpha1.TenantBinding,
	bindingNamed func(string) *v1alpha1.TenantBinding, policyNamed func(string) *v1alpha1.PlacementPolicy) identity {
	label, labelled := ns.Labels[guard.LabelTenant]
	if !labelled && len(listing) == 0 {
		return identity{}
	}
	id := identity{protected: true}
	var b *v1alpha1.TenantBinding
	switch {
	case len(listing) > 1:
		names := make([]string, len(listing))
		for i, l := range listing {
			names[i] = l.Name
		}
		slices.Sort(names)
		id.note = fmt.Sprintf("namespace %s is listed by several TenantBindings (%s)", ns.Name, strings.Join(names, ", "))
		return id
	case len(listing) == 1 && labelled && listing[0].Spec.TenantID != label:
		id.note = fmt.Sprintf("namespace %s is labelled %s=%s but listed by the TenantBinding of tenant %s",
			ns.Name, guard.LabelTenant, label, listing[0].Spec.TenantID)
		return id
	case len(listing) == 1:
		b = listing[0]
	case label == "":
		id.note = fmt.Sprintf("namespace %s has an empty %s label", ns.Name, guard.LabelTenant)
		return id
	default:
		b = bindingNamed(label)
	}
	if b != nil {
		id.tenant = &wire.Tenant{ID: b.Spec.TenantID, Pool: b.Spec.Pool()}
	} else {
		id.tenant = &wire.Tenant{ID: label}
	}
	name, source := policyName(b, ns)
	if name == "" {
		id.note = "the tenant has no TenantBinding with an effectivePolicyRef and the namespace no " + guard.AnnotationPolicy + " annotation"
		return id
	}
	p := policyNamed(name)
	if p == nil {
		id.note = fmt.Sprintf("PlacementPolicy %s, named by %s, does not exist", name, source)
		return id
	}
	id.policy, id.policyVersion = &wire.Policy{Name: p.Name, Spec: p.Spec}, p.ResourceVersion
	return id
}

// policyName returns the name of the policy that applies and where it came
// from: the binding's effectivePolicyRef, or else the namespace annotation.
func policyName(b *v1alpha1.TenantBinding, ns *corev1.Namespace) (name, source string) {
	if b != nil && b.Spec.EffectivePolicyRef != nil && b.Spec.EffectivePolicyRef.Name != "" {
		return b.Spec.EffectivePolicyRef.Name, "TenantBinding " + b.Name
	}
	if ns == nil {
		return "", ""
	}
	return ns.Annotations[guard.AnnotationPolicy], "the " + guard.AnnotationPolicy + " annotation of namespace " + ns.Name
}
