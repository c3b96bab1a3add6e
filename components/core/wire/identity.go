package wire

import (
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// TenantOf returns a resolved tenant as the evaluator takes it, or nil
// when the tenant is unresolved.
func TenantOf(t *resolve.Tenant) *Tenant {
	if t == nil {
		return nil
	}
	return &Tenant{ID: t.ID, Pool: t.Pool}
}

// PolicyOf returns a PlacementPolicy as the evaluator takes it, or nil
// when none applies.
func PolicyOf(p *v1alpha1.PlacementPolicy) *Policy {
	if p == nil {
		return nil
	}
	return &Policy{Name: p.Name, Spec: p.Spec}
}
