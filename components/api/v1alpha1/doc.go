// Package v1alpha1 holds the guard.xila.us/v1alpha1 API: PlacementPolicy,
// TenantBinding and NodeSecurityState.
//
// The kubebuilder markers on these types are the single source of truth for
// the CRDs under config/crd; run hack/update-codegen.sh after changing them.
// validation.go mirrors the CRDs' rules in Go for callers that receive these
// types outside the API server, such as the evaluator.
//
// +kubebuilder:object:generate=true
// +groupName=guard.xila.us
package v1alpha1
