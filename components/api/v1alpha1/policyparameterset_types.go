package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PolicyParameterSet holds the principals and keys the platform's
// ValidatingAdmissionPolicies read. The policies' CEL names no user,
// group, namespace or label key of an installation: each policy's binding
// passes this object as its parameter (paramKind), so the policies are
// the same text in every installation and the API server type-checks
// them against this schema. The chart renders one, named after the
// release; while it is missing, the policies that read it refuse every
// write they guard (parameterNotFoundAction: Deny). It is cluster-scoped,
// so only those who may write cluster-scoped guard.xila.us objects (the
// cluster's administrators) can change who the policies trust.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gparams,categories=xila-guard
// +kubebuilder:printcolumn:name="Pool label",type=string,JSONPath=`.spec.poolLabel`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyParameterSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the policies read.
	// +required
	Spec PolicyParameterSetSpec `json:"spec"`
}

// Principals names users and groups. A node's own credentials
// (system:node:*, system:nodes) are never matched, whatever the lists say.
type Principals struct {
	// users are user names, as the API server authenticates them
	// (system:serviceaccount:<namespace>:<name> for a service account).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Users []string `json:"users,omitempty"`

	// groups are group names.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// PolicyParameterSetSpec is what the admission policies read: who may write
// each guarded input, and the keys they guard. docs/security.md says why
// each principal is trusted.
type PolicyParameterSetSpec struct {
	// poolLabel is the node label and NoSchedule taint key that puts a
	// node in a tenant's pool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +required
	PoolLabel string `json:"poolLabel"`

	// administrators may create the reserved namespaces and the accounts
	// and tokens in them, and give a Service external addresses.
	// +optional
	Administrators Principals `json:"administrators,omitempty"`

	// poolAdmins may add, change or remove a node's pool label and taint.
	// +optional
	PoolAdmins Principals `json:"poolAdmins,omitempty"`

	// evidenceLabellers may write the node labels under
	// evidenceLabelPrefixes.
	// +optional
	EvidenceLabellers Principals `json:"evidenceLabellers,omitempty"`

	// evidenceLabelPrefixes are the prefixes of the node labels that
	// become evidence.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +optional
	EvidenceLabelPrefixes []string `json:"evidenceLabelPrefixes,omitempty"`

	// complianceLabellers may write a node's compliance.guard.xila.us/
	// labels.
	// +optional
	ComplianceLabellers Principals `json:"complianceLabellers,omitempty"`

	// trustedDaemonSetAccounts are the service accounts, as
	// <namespace>:<name>, whose DaemonSet pods may tolerate and select
	// the pools from a namespace of no tenant.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	TrustedDaemonSetAccounts []string `json:"trustedDaemonSetAccounts,omitempty"`

	// daemonSetControllers are the users whose writes of a DaemonSet's pod
	// make it a DaemonSet pod.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	DaemonSetControllers []string `json:"daemonSetControllers,omitempty"`

	// attestationController is the only user that writes attested
	// evidence; empty, nobody may.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	AttestationController string `json:"attestationController,omitempty"`

	// scheduler is the controlled scheduler's user, which records the
	// evidence a pod was bound against.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Scheduler string `json:"scheduler,omitempty"`

	// recordBinders are the integrations' binders whose bindings carry the
	// record the webhook adds.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	RecordBinders []string `json:"recordBinders,omitempty"`

	// reservedNamespaces hold identities the platform trusts by name; only
	// administrators create them, or the accounts and tokens in them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	ReservedNamespaces []string `json:"reservedNamespaces,omitempty"`

	// platformCallers may add or remove a GPUDevice's protection finalizer
	// and template label.
	// +optional
	PlatformCallers Principals `json:"platformCallers,omitempty"`
}

// PolicyParameterSetList is a list of PolicyParameterSet.
// +kubebuilder:object:root=true
type PolicyParameterSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the parameter objects.
	Items []PolicyParameterSet `json:"items"`
}
