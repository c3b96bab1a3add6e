package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of GPUClass, GPUDevice and GPUSettings.
const GroupName = "gpu.guard.xila.us"

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&GPUClass{}, &GPUClassList{},
		&GPUDevice{}, &GPUDeviceList{},
		&GPUSettings{}, &GPUSettingsList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// Labels, annotations and finalizers of GPUs for VMs. The admission
// policies of the chart name the same strings.
const (
	// LabelDevice on a VMI (or the VMI template of a VM, replica set or
	// pool) names the GPUDevice, in the same namespace, through which it
	// reaches its GPUs. An object that carries a GPU without it is refused.
	LabelDevice = GroupName + "/device"

	// AnnotationDeviceClass on a VMI whose device label names no existing
	// device asks the controller to order one of this class for it: the
	// VMI's device template. The device is marked with LabelTemplateDevice
	// and deleted with its VMI.
	AnnotationDeviceClass = GroupName + "/device-class"

	// LabelTemplateDevice marks a GPUDevice the controller created from a
	// VMI's device template; its value is the VMI's name. Only platform
	// callers may set, change or remove it.
	LabelTemplateDevice = GroupName + "/template-device"

	// LabelUsage is the reserved key of usage records: the controller's
	// ConfigMaps in the platform namespace, one per held device, with the
	// device's namespace and name as value. No write in a tenant namespace
	// may add it, so a selector on the key sees only genuine records.
	LabelUsage = GroupName + "/usage"

	// FinalizerDevice keeps a released device, its holder and its usage
	// record until no VMI uses it. Only platform callers may add or
	// remove it.
	FinalizerDevice = GroupName + "/device-protection"

	// FinalizerClass keeps a class while devices hold it; while a class
	// carries it what the class sells is immutable.
	FinalizerClass = GroupName + "/class-protection"

	// SettingsName is the name of the GPUSettings in the platform
	// namespace.
	SettingsName = "xila-guard-gpu-settings"
)
