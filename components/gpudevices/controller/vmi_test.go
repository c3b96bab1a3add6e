package controller

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRequireVMIs(t *testing.T) {
	without := meta.NewDefaultRESTMapper(nil)
	if err := RequireVMIs(without); !errors.Is(err, ErrNoVMIs) {
		t.Errorf("without the CRD: %v, want ErrNoVMIs", err)
	}
	old := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "kubevirt.io", Version: "v1alpha3"}})
	old.Add(schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1alpha3", Kind: "VirtualMachineInstance"}, meta.RESTScopeNamespace)
	if err := RequireVMIs(old); !errors.Is(err, ErrNoVMIs) {
		t.Errorf("with only v1alpha3: %v, want ErrNoVMIs", err)
	}
	with := meta.NewDefaultRESTMapper([]schema.GroupVersion{VMIGroupVersionKind.GroupVersion()})
	with.Add(VMIGroupVersionKind, meta.RESTScopeNamespace)
	if err := RequireVMIs(with); err != nil {
		t.Errorf("with the CRD: %v", err)
	}
}

func TestVMIAccessors(t *testing.T) {
	vmi := NewVMI()
	vmi.SetName("vm")
	vmi.SetLabels(map[string]string{"gpu.guard.xila.us/device": "gpu-0"})
	if err := unstructured.SetNestedSlice(vmi.Object, []any{
		map[string]any{"name": "g1", "deviceName": "nvidia.com/H100"},
		map[string]any{"name": "g2", "deviceName": "nvidia.com/H100"},
	}, "spec", "domain", "devices", "gpus"); err != nil {
		t.Fatal(err)
	}
	if got := deviceOf(vmi); got != "gpu-0" {
		t.Errorf("deviceOf = %q", got)
	}
	if got := gpuCount(vmi); got != 2 {
		t.Errorf("gpuCount = %d, want 2", got)
	}
	if got := gpuCount(NewVMI()); got != 0 {
		t.Errorf("gpuCount of a VMI without GPUs = %d", got)
	}
	if u := userOf(vmi); u.Name != "vm" || u.Deleting {
		t.Errorf("userOf = %+v", u)
	}
	if l := NewVMIList(); l.GetKind() != "VirtualMachineInstanceList" || l.GetAPIVersion() != "kubevirt.io/v1" {
		t.Errorf("list kind %s %s", l.GetAPIVersion(), l.GetKind())
	}
}
