// Package v1alpha1 holds the gpu.guard.xila.us/v1alpha1 API: GPUClass, the
// offer of GPUs for KubeVirt VMs an administrator sells, and GPUDevice, a
// tenant's order of devices of a class. A VMI reaches a GPU only through a
// device; the admission policies of the chart (gpuDevicePolicies) and the
// GPU controller (components/gpudevices) keep it so.
//
// The kubebuilder markers are the source of the CRDs under config/crd; run
// hack/update-codegen.sh after changing them.
//
// +kubebuilder:object:generate=true
// +groupName=gpu.guard.xila.us
package v1alpha1
