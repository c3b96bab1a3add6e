package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KeyReleasePolicy gives one tenant's pods keys from the key broker. It is
// cluster-scoped, so only administrators write it: a tenant can read the
// keys it was given, never add one. The broker releases a key to a pod of
// the tenant that runs on the node it was bound to, while that node's
// attested evidence satisfies the tenant's PlacementPolicy.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gkrp,categories=xila-guard
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantId`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KeyReleasePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the tenant and its keys.
	// +required
	Spec KeyReleasePolicySpec `json:"spec"`
}

// KeyReleasePolicySpec names the tenant whose pods may receive the keys,
// and the keys.
type KeyReleasePolicySpec struct {
	// tenantId is the tenant whose pods may receive the keys: the tenantId
	// of its TenantBinding.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	TenantID string `json:"tenantId"`

	// serviceAccounts, when set, narrows the release to pods that run as
	// one of these service accounts, each "<namespace>/<name>" in one of
	// the tenant's namespaces. Empty allows every pod of the tenant.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`

	// keys are the resources released, each at most once.
	// +listType=map
	// +listMapKey=resource
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +required
	Keys []KeyRelease `json:"keys"`
}

// KeyRelease is one key: the resource path a client asks for, and where
// the key broker's store keeps it.
type KeyRelease struct {
	// resource is the path a client requests,
	// "<repository>/<type>/<tag>", as in GET /kbs/v0/resource/<resource>.
	// Paths are per tenant: two tenants may use the same path for
	// different keys.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`
	// +required
	Resource string `json:"resource"`

	// secretRef is where the key is kept: a key of a Secret in the key
	// broker's namespace.
	// +required
	SecretRef KeySecretReference `json:"secretRef"`
}

// KeySecretReference names one key of a Secret in the key broker's
// namespace.
type KeySecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// KeyReleasePolicyList is a list of KeyReleasePolicy.
// +kubebuilder:object:root=true
type KeyReleasePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the policies.
	Items []KeyReleasePolicy `json:"items"`
}
