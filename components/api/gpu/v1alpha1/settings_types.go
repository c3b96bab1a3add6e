package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUSettings is what the GPU controller records for the admission
// policies and the webhook: the resources and DeviceClasses its classes
// sell, the VMIs that hold a device, and KubeVirt's controller. One object,
// SettingsName, in the platform namespace; only the GPU controller writes
// it. The pod and VM policies take it as their parameter and refuse every
// request they match while it is missing.
//
// A custom resource, not a ConfigMap: the API server keeps the parameter
// informer of a built-in kind stopped, with whatever it last held, once no
// binding names that kind for a moment (as when the chart is uninstalled),
// and policies would then judge on stale settings until it restarts.
// Informers of custom resources are made anew.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=gpuset,categories=xila-guard
// +kubebuilder:printcolumn:name="Resources",type=string,JSONPath=`.spec.resourceNames`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUSettings struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the policies and the webhook read.
	// +required
	Spec GPUSettingsSpec `json:"spec"`
}

// GPUSettingsSpec lists, each sorted and without duplicates, what the
// classes sell and who holds a device.
type GPUSettingsSpec struct {
	// resourceNames are the resourceName of every class: pods may request
	// them only as KubeVirt's launcher pods of a VMI that holds a device.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	ResourceNames []string `json:"resourceNames,omitempty"`

	// kubevirtController is the user name of KubeVirt's controller, the
	// only user whose launcher pods may request a GPU for VMs; empty, none
	// may.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	KubeVirtController string `json:"kubevirtController,omitempty"`

	// holders are the VMIs that hold a device (Held, or Released while a
	// VMI still uses it), as <namespace>/<VMI UID>.
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Holders []string `json:"holders,omitempty"`

	// deviceClasses are the DeviceClasses of the classes whose devices come
	// from dynamic resource allocation (GPUSourceResourceClaim): a claim
	// of one is reserved only for the launcher pods of a VMI holding a
	// device of it.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	DeviceClasses []string `json:"deviceClasses,omitempty"`

	// claimHolders are the VMIs holding a device of such a class, as
	// <namespace>/<VMI UID>=<DeviceClass> (ClaimHolder).
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=384
	// +optional
	ClaimHolders []string `json:"claimHolders,omitempty"`
}

// GPUSettingsList is a list of GPUSettings.
// +kubebuilder:object:root=true
type GPUSettingsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the settings.
	Items []GPUSettings `json:"items"`
}

// ClaimHolder is the claimHolders entry of a VMI that holds a device of
// the DeviceClass.
func ClaimHolder(namespace, vmiUID, deviceClass string) string {
	return namespace + "/" + vmiUID + "=" + deviceClass
}
