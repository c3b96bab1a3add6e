package cluster

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/webhook/internal/admission"
)

// Resolve decides a namespace's tenant and policy with the scheduler's
// rules (docs/architecture.md): the TenantBinding that lists the namespace
// is authoritative; a namespace that is only labelled belongs to the
// labelled tenant, whose TenantBinding (named after it) supplies pool and
// policy; two bindings, an empty label, or a label that contradicts the
// binding leave the tenant unresolved. The policy is the binding's
// effectivePolicyRef, else the namespace's guard.xila.us/policy annotation.
// bindingNamed and policyNamed return nil for a missing object.
func Resolve(ns *corev1.Namespace, listing []*v1alpha1.TenantBinding,
	bindingNamed func(string) *v1alpha1.TenantBinding, policyNamed func(string) *v1alpha1.PlacementPolicy) admission.Identity {
	label, labelled := ns.Labels[guard.LabelTenant]
	if !labelled && len(listing) == 0 {
		return admission.Identity{}
	}
	id := admission.Identity{Protected: true}
	var b *v1alpha1.TenantBinding
	switch {
	case len(listing) > 1:
		names := make([]string, len(listing))
		for i, l := range listing {
			names[i] = l.Name
		}
		slices.Sort(names)
		id.Note = fmt.Sprintf("namespace %s is listed by several TenantBindings (%s)", ns.Name, strings.Join(names, ", "))
		return id
	case len(listing) == 1 && labelled && listing[0].Spec.TenantID != label:
		id.Note = fmt.Sprintf("namespace %s is labelled %s=%s but listed by the TenantBinding of tenant %s",
			ns.Name, guard.LabelTenant, label, listing[0].Spec.TenantID)
		return id
	case len(listing) == 1:
		b = listing[0]
	case label == "":
		id.Note = fmt.Sprintf("namespace %s has an empty %s label", ns.Name, guard.LabelTenant)
		return id
	default:
		b = bindingNamed(label)
	}
	if b != nil {
		id.Tenant = &wire.Tenant{ID: b.Spec.TenantID, Pool: b.Spec.Pool()}
	} else {
		id.Tenant = &wire.Tenant{ID: label}
	}
	name, source := ns.Annotations[guard.AnnotationPolicy], "the "+guard.AnnotationPolicy+" annotation of namespace "+ns.Name
	if b != nil && b.Spec.EffectivePolicyRef != nil && b.Spec.EffectivePolicyRef.Name != "" {
		name, source = b.Spec.EffectivePolicyRef.Name, "TenantBinding "+b.Name
	}
	if name == "" {
		id.Note = "the tenant has no TenantBinding with an effectivePolicyRef and the namespace no " + guard.AnnotationPolicy + " annotation"
		return id
	}
	p := policyNamed(name)
	if p == nil {
		id.Note = fmt.Sprintf("PlacementPolicy %s, named by %s, does not exist", name, source)
		return id
	}
	id.Policy = &wire.Policy{Name: p.Name, Spec: p.Spec}
	return id
}
