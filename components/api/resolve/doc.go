// Package resolve decides which tenant a namespace's pods belong to and
// which PlacementPolicy applies to them. The scheduler plugin, the
// admission webhook and the observe controller all judge pods by these
// rules, each reading TenantBindings and PlacementPolicies from its own
// caches through a Lookup.
package resolve
