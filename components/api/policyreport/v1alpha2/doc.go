// Package v1alpha2 holds the few Go types of the Policy Report API,
// wgpolicyk8s.io/v1alpha2 PolicyReport, that the observe controller writes:
// the format Kyverno writes and policy-reporter reads. The group is not
// Xila Guard's; the types follow the published v1alpha2 schema field for
// field, so that reports written here are read there, and the CRD
// generated from them (config/policyreport-crd) is only for clusters that
// have no copy of their own.
//
// +kubebuilder:object:generate=true
// +groupName=wgpolicyk8s.io
package v1alpha2
