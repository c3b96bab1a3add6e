package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TenantBinding ties a tenant to the namespaces it owns, its node pool and
// its PlacementPolicy. There is one per tenant, named after the tenant's ID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gtb,categories=xila-guard
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantId`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.status.pool`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.status.policy`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.poolNodeCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.tenantId",message="metadata.name must equal spec.tenantId, so that each tenant has exactly one TenantBinding"
type TenantBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec binds the tenant.
	// +required
	Spec TenantBindingSpec `json:"spec"`

	// status is what the platform observed about the binding.
	// +optional
	Status TenantBindingStatus `json:"status,omitempty"`
}

// TenantBindingSpec binds a tenant to its namespaces, pool and policy.
type TenantBindingSpec struct {
	// tenantId identifies the tenant: the value of the guard.xila.us/tenant
	// namespace label and, by default, of the guard.xila.us/tenant-pool node
	// label. A DNS label; immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantId is immutable"
	// +required
	TenantID string `json:"tenantId"`

	// namespaces the tenant owns. Pods in them are protected whether or not
	// they request a GPU.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespaces []string `json:"namespaces"`

	// nodePool is the value of the guard.xila.us/tenant-pool label on the
	// tenant's nodes. Defaults to tenantId when empty.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	// +optional
	NodePool string `json:"nodePool,omitempty"`

	// effectivePolicyRef names the tenant's PlacementPolicy. It is
	// authoritative; only when it is empty does the namespace annotation
	// guard.xila.us/policy name the policy instead.
	// +optional
	EffectivePolicyRef *PolicyReference `json:"effectivePolicyRef,omitempty"`
}

// Pool returns the pool label value of the tenant's nodes: NodePool, or the
// tenant ID when NodePool is empty.
func (s *TenantBindingSpec) Pool() string {
	if s.NodePool != "" {
		return s.NodePool
	}
	return s.TenantID
}

// TenantBindingStatus is what the platform observed about a binding.
type TenantBindingStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the binding's state; Ready is True when the
	// policy of every namespace resolves and is valid and every namespace
	// exists.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// pool is the guard.xila.us/tenant-pool label value of the tenant's
	// nodes: spec.nodePool, or the tenant ID when it is empty.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Pool string `json:"pool,omitempty"`

	// policy is the PlacementPolicy the binding's namespaces resolve to:
	// spec.effectivePolicyRef, or else the policy every namespace's
	// guard.xila.us/policy annotation names. Empty when no policy is named,
	// or when the annotations name different ones (namespaces then says
	// which).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Policy string `json:"policy,omitempty"`

	// policyFound is true when the policy of every namespace exists.
	// +optional
	PolicyFound bool `json:"policyFound"`

	// namespaces are the namespaces of spec.namespaces, in that order, with
	// what was found about each.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Namespaces []BindingNamespace `json:"namespaces,omitempty"`

	// poolNodeCount is how many nodes carry the pool label.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PoolNodeCount int32 `json:"poolNodeCount"`

	// poolNodes are the names of the pool's nodes in alphabetical order,
	// at most MaxPoolNodes (64) of them; poolNodeCount counts them all.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	PoolNodes []string `json:"poolNodes,omitempty"`
}

// MaxPoolNodes is the most node names a TenantBinding's status lists.
const MaxPoolNodes = 64

// BindingNamespace is what was found about one namespace of a binding.
type BindingNamespace struct {
	// name of the namespace.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// exists is true when the namespace exists.
	// +required
	Exists bool `json:"exists"`

	// policy is the PlacementPolicy the namespace's pods answer to, once
	// it exists; empty when none resolves.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Policy string `json:"policy,omitempty"`
}

// TenantBindingList is a list of TenantBinding.
// +kubebuilder:object:root=true
type TenantBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the bindings.
	Items []TenantBinding `json:"items"`
}
