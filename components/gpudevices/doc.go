// Package gpudevices is the Xila Guard GPU controller for KubeVirt VMs. It
// protects GPUClasses and GPUDevices with finalizers, keeps the settings
// ConfigMap the admission policies read (every GPU resource name of the
// classes), judges each device against its class, records which VMI holds
// it and since when, keeps one usage record per held device in the
// platform namespace, and orders the devices that VMIs ask for through
// their device template.
package gpudevices
