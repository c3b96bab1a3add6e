package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUMode is how a GPUClass hands its GPUs to a VM.
// +kubebuilder:validation:Enum=Passthrough;VGPU;MIG
type GPUMode string

// GPU modes a GPUClass sells.
const (
	// GPUModePassthrough hands whole physical GPUs to the VM (VFIO).
	GPUModePassthrough GPUMode = "Passthrough"
	// GPUModeVGPU hands mediated (vGPU) devices of a profile to the VM.
	GPUModeVGPU GPUMode = "VGPU"
	// GPUModeMIG hands MIG instances of a profile to the VM.
	GPUModeMIG GPUMode = "MIG"
)

// GPUSourceKind is where the devices of a GPUClass come from.
// +kubebuilder:validation:Enum=HostDevice;MediatedDevice;ResourceClaim
type GPUSourceKind string

// Kinds of GPU sources.
const (
	// GPUSourceHostDevice: PCI host devices a device plugin advertises under
	// the class's resourceName (KubeVirt's permittedHostDevices.pciHostDevices).
	GPUSourceHostDevice GPUSourceKind = "HostDevice"
	// GPUSourceMediatedDevice: mediated devices a device plugin advertises
	// under the class's resourceName (permittedHostDevices.mediatedDevices).
	GPUSourceMediatedDevice GPUSourceKind = "MediatedDevice"
	// GPUSourceResourceClaim: devices allocated by dynamic resource
	// allocation; resourceName is then the DeviceClass.
	GPUSourceResourceClaim GPUSourceKind = "ResourceClaim"
)

// GPUClass is an offer of GPUs for VMs that the platform sells: what a
// device of the class is, how many one order may hold, and where the
// devices come from. Cluster-scoped and admin-owned; tenants order devices
// of a class with a GPUDevice.
//
// While a class carries its protection finalizer (the GPU controller sets
// it on every class) what it sells is immutable: held devices and their
// usage records name their class, so a changed offer is a new class.
// resourceName and nodeSelector stay open.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gpuc,categories=xila-guard
// +kubebuilder:printcolumn:name="Vendor",type=string,JSONPath=`.spec.vendor`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resourceName`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.heldDevices`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the offer.
	// +required
	Spec GPUClassSpec `json:"spec"`

	// status is what the GPU controller observed about the class.
	// +optional
	Status GPUClassStatus `json:"status,omitempty"`
}

// GPUClassSpec is what a GPUClass sells and where its devices come from.
// +kubebuilder:validation:XValidation:rule="self.mode == 'Passthrough' || (has(self.profile) && size(self.profile) > 0)",message="profile is required for VGPU and MIG classes"
type GPUClassSpec struct {
	// vendor of the GPUs, e.g. nvidia.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Vendor string `json:"vendor"`

	// model of the GPUs, e.g. H100-SXM5-80GB.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Model string `json:"model"`

	// mode is how the GPUs are handed to a VM.
	// +required
	Mode GPUMode `json:"mode"`

	// profile of a vGPU or MIG device, e.g. GRID H100-40C or 3g.40gb.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Profile string `json:"profile,omitempty"`

	// memory of one device.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// maxCount is the most devices of the class one GPUDevice may hold.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:default=1
	// +optional
	MaxCount int32 `json:"maxCount,omitempty"`

	// sourceKind is where the devices come from.
	// +kubebuilder:default=HostDevice
	// +optional
	SourceKind GPUSourceKind `json:"sourceKind,omitempty"`

	// resourceName is the extended resource (or, for ResourceClaim, the
	// DeviceClass) under which the nodes offer the devices, e.g.
	// nvidia.com/GH100_H100_SXM5_80GB. Pods may request it only as
	// KubeVirt's launcher pods of a VMI.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +required
	ResourceName string `json:"resourceName"`

	// nodeSelector picks the nodes that offer the class.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// GPUClassStatus is what the GPU controller observed about a class.
type GPUClassStatus struct {
	// heldDevices is the number of GPUDevices of the class held by a VMI.
	// +optional
	HeldDevices int32 `json:"heldDevices,omitempty"`

	// conditions describe the class; Ready is True while the controller
	// protects it.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GPUClassList is a list of GPUClass.
// +kubebuilder:object:root=true
type GPUClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the classes.
	Items []GPUClass `json:"items"`
}

// GPUDevice is a tenant's order of GPUs of one class for its VMs. A VMI
// reaches a GPU only through a device: it names the device in its
// gpu.guard.xila.us/device label, and the GPU controller records which VMI
// holds the device and since when. A released device keeps its finalizer,
// and its usage record, until no VMI uses it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=gpud,categories=xila-guard
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.spec.count`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Held-By",type=string,JSONPath=`.status.heldBy.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUDevice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the order.
	// +required
	Spec GPUDeviceSpec `json:"spec"`

	// status is what the GPU controller observed about the device.
	// +optional
	Status GPUDeviceStatus `json:"status,omitempty"`
}

// GPUDeviceSpec orders devices of one class.
type GPUDeviceSpec struct {
	// className names the GPUClass; immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="className is immutable"
	// +required
	ClassName string `json:"className"`

	// count is how many devices of the class the order holds; at most the
	// class's maxCount. Immutable.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="count is immutable"
	// +kubebuilder:default=1
	// +optional
	Count int32 `json:"count,omitempty"`
}

// GPUDevicePhase summarises a device.
// +kubebuilder:validation:Enum=Pending;Available;Held;Released;Invalid
type GPUDevicePhase string

// Phases of a GPUDevice.
const (
	// GPUDevicePending: the controller has not judged the device yet.
	GPUDevicePending GPUDevicePhase = "Pending"
	// GPUDeviceAvailable: the order is valid and no VMI holds it.
	GPUDeviceAvailable GPUDevicePhase = "Available"
	// GPUDeviceHeld: a VMI holds the device.
	GPUDeviceHeld GPUDevicePhase = "Held"
	// GPUDeviceReleased: the device is being deleted and waits until no
	// VMI uses it.
	GPUDeviceReleased GPUDevicePhase = "Released"
	// GPUDeviceInvalid: the class is missing, being deleted, or sells
	// fewer devices per order than the device counts.
	GPUDeviceInvalid GPUDevicePhase = "Invalid"
)

// GPUDeviceStatus is what the GPU controller observed about a device.
type GPUDeviceStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the device.
	// +optional
	Phase GPUDevicePhase `json:"phase,omitempty"`

	// resourceName is the class's resourceName the device was judged
	// against.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`

	// heldBy is the VMI that holds the device.
	// +optional
	HeldBy *GPUDeviceHolder `json:"heldBy,omitempty"`

	// conditions describe the device; Ready is True when the order is
	// valid.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GPUDeviceHolder is the VMI that holds a device.
type GPUDeviceHolder struct {
	// name of the VirtualMachineInstance.
	// +required
	Name string `json:"name"`
	// uid of the VirtualMachineInstance.
	// +required
	UID string `json:"uid"`
	// since is when the controller first saw the VMI hold the device.
	// +required
	Since metav1.Time `json:"since"`
}

// GPUDeviceList is a list of GPUDevice.
// +kubebuilder:object:root=true
type GPUDeviceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the devices.
	Items []GPUDevice `json:"items"`
}
