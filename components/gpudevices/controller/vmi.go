package controller

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// VMIGroupVersionKind is KubeVirt's VirtualMachineInstance, read as
// unstructured objects.
var VMIGroupVersionKind = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"}

// ErrNoVMIs is returned when the cluster does not serve
// VirtualMachineInstances.
var ErrNoVMIs = errors.New("the cluster does not serve kubevirt.io/v1 VirtualMachineInstance: install KubeVirt (its CRDs) before the GPU controller")

// NewVMI returns an empty VirtualMachineInstance.
func NewVMI() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(VMIGroupVersionKind)
	return u
}

// NewVMIList returns an empty list of VirtualMachineInstances.
func NewVMIList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(VMIGroupVersionKind.GroupVersion().WithKind(VMIGroupVersionKind.Kind + "List"))
	return l
}

// RequireVMIs returns ErrNoVMIs when mapper does not know
// VirtualMachineInstances of kubevirt.io/v1.
func RequireVMIs(mapper meta.RESTMapper) error {
	_, err := mapper.RESTMapping(VMIGroupVersionKind.GroupKind(), VMIGroupVersionKind.Version)
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%w (%v)", ErrNoVMIs, err)
	case err != nil:
		return fmt.Errorf("looking up kubevirt.io/v1 VirtualMachineInstance: %w", err)
	}
	return nil
}

// deviceOf is the device a VMI names, or "".
func deviceOf(o client.Object) string { return o.GetLabels()[gpuv1alpha1.LabelDevice] }

// gpuCount is the number of entries of spec.domain.devices.gpus of a VMI.
func gpuCount(vmi *unstructured.Unstructured) int {
	gpus, _, _ := unstructured.NestedSlice(vmi.Object, "spec", "domain", "devices", "gpus")
	return len(gpus)
}

// userOf is a VMI as a user of its device.
func userOf(vmi *unstructured.Unstructured) User {
	return User{Name: vmi.GetName(), UID: vmi.GetUID(), Created: vmi.GetCreationTimestamp().Time,
		Deleting: vmi.GetDeletionTimestamp() != nil}
}
