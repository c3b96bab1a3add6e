package evidence

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestMockDRADevices(t *testing.T) {
	const driver = "gpu.example.com"
	node := func(annotation string, labels ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{
			guard.LabelMockDRADriver: driver, guard.LabelMockSharingMode: "TimeSlicing", guard.LabelMockCCMode: "Off"}}}
		for i := 0; i+1 < len(labels); i += 2 {
			n.Labels[labels[i]] = labels[i+1]
		}
		if annotation != "" {
			n.Annotations = map[string]string{guard.AnnotationMockDRADevices: annotation}
		}
		return n
	}
	slice := fixture.MakeResourceSlice("w1", driver).GPU("gpu-1", "GPU-b", "Example GPU").GPU("gpu-0", "GPU-a", "Example GPU").Obj()
	// An older generation of the same pool, still listed while the driver
	// replaces it, and another node's and another driver's slices.
	old := fixture.MakeResourceSlice("w1", driver).GPU("gpu-9", "GPU-old", "Example GPU").Obj()
	old.Name, old.Spec.Pool.Generation = "w1-old", 0
	other := fixture.MakeResourceSlice("w2", driver).GPU("gpu-0", "GPU-w2", "Example GPU").Obj()
	nvidia := fixture.MakeResourceSlice("w1", "gpu.nvidia.com").GPU("gpu-0", "GPU-n", "H100").Obj()
	all := []resourcev1.ResourceSlice{*slice, *old, *other, *nvidia}
	dev := func(name, uuid string, mode v1alpha1.GPUSharingMode) v1alpha1.GPUDevice {
		return v1alpha1.GPUDevice{ID: uuid, Vendor: "mock", Model: "Example GPU", SharingMode: mode, CCMode: v1alpha1.CCModeOff,
			DRA: &v1alpha1.DRADeviceRef{Driver: driver, Pool: "w1", Device: name}}
	}
	cases := []struct {
		name   string
		node   *corev1.Node
		have   int
		want   []v1alpha1.GPUDevice
		wantOK bool
	}{
		{name: "every device of the driver on the node, newest generation, in the node's mode, in device order", node: node(""),
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", v1alpha1.SharingTimeSlicing), dev("gpu-1", "GPU-b", v1alpha1.SharingTimeSlicing)}, wantOK: true},
		{name: "the devices the annotation lists, each in its mode", node: node("gpu-1=Exclusive"),
			want: []v1alpha1.GPUDevice{dev("gpu-1", "GPU-b", v1alpha1.SharingExclusive)}, wantOK: true},
		{name: "a listed device without a mode takes the node's", node: node(" gpu-0 , gpu-1=MPS"),
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", v1alpha1.SharingTimeSlicing), dev("gpu-1", "GPU-b", v1alpha1.SharingMPS)}, wantOK: true},
		{name: "a device the slices do not hold makes the evidence incomplete", node: node("gpu-0,gpu-7"),
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", v1alpha1.SharingTimeSlicing)}},
		{name: "a device of an older generation is not held", node: node("gpu-9"), want: nil},
		{name: "an unknown mode makes the evidence incomplete", node: node("gpu-0=Shared"), want: nil},
		{name: "a device listed twice makes the evidence incomplete", node: node("gpu-0,gpu-0=MPS"),
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", v1alpha1.SharingTimeSlicing)}},
		{name: "an unknown node mode makes the evidence incomplete", node: node("", guard.LabelMockSharingMode, "Sometimes"),
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", ""), dev("gpu-1", "GPU-b", "")}},
		{name: "more devices than a state may list", node: node(""), have: maxDevices - 1,
			want: []v1alpha1.GPUDevice{dev("gpu-0", "GPU-a", v1alpha1.SharingTimeSlicing)}},
		{name: "no driver named", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := mockDRADevices(tc.node, all, tc.have)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("devices (-want +got):\n%s", d)
			}
		})
	}
}

func TestMockDRADevicesOfMIG(t *testing.T) {
	const driver = "gpu.nvidia.com"
	s := fixture.MakeResourceSlice("w1", driver).Obj()
	s.Spec.Devices = []resourcev1.Device{{Name: "gpu-0-mig-1g", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": {StringValue: ptr("mig")}, "uuid": {StringValue: ptr("MIG-1")}, "productName": {StringValue: ptr("NVIDIA H100")},
		"profile": {StringValue: ptr("1g.10gb")}, "parentUUID": {StringValue: ptr("GPU-0")}}}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{guard.LabelMockDRADriver: driver, guard.LabelMockSharingMode: "Exclusive"}}}
	got, ok := mockDRADevices(n, []resourcev1.ResourceSlice{*s}, 0)
	want := []v1alpha1.GPUDevice{{ID: "MIG-1", Vendor: "mock", Model: "NVIDIA H100", MIG: true, MIGProfile: "1g.10gb", ParentID: "GPU-0",
		SharingMode: v1alpha1.SharingExclusive, DRA: &v1alpha1.DRADeviceRef{Driver: driver, Pool: "w1", Device: "gpu-0-mig-1g"}}}
	if d := cmp.Diff(want, got); d != "" || !ok {
		t.Errorf("ok %v, devices (-want +got):\n%s", ok, d)
	}
}

func ptr[T any](v T) *T { return &v }
