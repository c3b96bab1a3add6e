package enforcement

import (
	"github.com/xila-guard/xila-guard/components/api/resolve"
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

// identityOf converts the shared resolution into the plugin's identity.
func identityOf(r resolve.Identity) identity {
	id := identity{protected: r.Protected, tenant: wire.TenantOf(r.Tenant), policy: wire.PolicyOf(r.Policy), note: r.Note}
	if r.Policy != nil {
		id.policyVersion = r.Policy.ResourceVersion
	}
	return id
}
