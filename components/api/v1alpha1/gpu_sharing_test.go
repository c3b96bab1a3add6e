package v1alpha1

import "testing"

func TestGPUDeviceSharing(t *testing.T) {
	cases := []struct {
		device  GPUDevice
		mig     bool
		sharing GPUSharingMode
	}{
		{GPUDevice{SharingMode: SharingExclusive}, false, SharingExclusive},
		{GPUDevice{SharingMode: SharingTimeSlicing}, false, SharingTimeSlicing},
		{GPUDevice{}, false, ""},
		{GPUDevice{SharingMode: SharingMIG}, true, SharingExclusive},
		{GPUDevice{MIG: true, SharingMode: SharingMIG}, true, SharingExclusive},
		{GPUDevice{MIG: true, SharingMode: SharingExclusive}, true, SharingExclusive},
		{GPUDevice{MIG: true, SharingMode: SharingTimeSlicing}, true, SharingTimeSlicing},
		{GPUDevice{MIG: true, SharingMode: SharingMPS}, true, SharingMPS},
		{GPUDevice{MIG: true}, true, ""},
	}
	for _, tc := range cases {
		if got := tc.device.MIGPartitioned(); got != tc.mig {
			t.Errorf("%+v: MIGPartitioned() = %v, want %v", tc.device, got, tc.mig)
		}
		if got := tc.device.SliceSharing(); got != tc.sharing {
			t.Errorf("%+v: SliceSharing() = %q, want %q", tc.device, got, tc.sharing)
		}
	}
}
