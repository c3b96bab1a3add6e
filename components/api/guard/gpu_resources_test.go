package guard

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// resourceName stands in for corev1.ResourceName, which this package does
// not import.
type resourceName string

func TestAllocatableGPUs(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name        string
		allocatable map[resourceName]resource.Quantity
		want        int64
	}{
		{name: "no resources", want: 0},
		{name: "no GPU resources", allocatable: map[resourceName]resource.Quantity{
			"cpu": q("64"), "memory": q("512Gi"), "example.com/gpu": q("1"), "hugepages-2Mi": q("8")}, want: 0},
		{name: "another vendor's GPUs", allocatable: map[resourceName]resource.Quantity{"amd.com/gpu": q("8")}, want: 8},
		{name: "KubeVirt passthrough and mediated devices", allocatable: map[resourceName]resource.Quantity{
			"nvidia.com/GH100_H100_SXM5_80GB": q("4"), "nvidia.com/GRID_A100-4C": q("10")}, want: 14},
		{name: "Intel GPUs, not their capacities", allocatable: map[resourceName]resource.Quantity{
			"gpu.intel.com/i915": q("2"), "gpu.intel.com/millicores": q("2000"), "gpu.intel.com/memory.max": q("16Gi")}, want: 2},
		{name: "whole GPUs", allocatable: map[resourceName]resource.Quantity{"cpu": q("64"), ResourceGPU: q("8")}, want: 8},
		{name: "renamed shared replicas", allocatable: map[resourceName]resource.Quantity{ResourceGPUShared: q("32")}, want: 32},
		{name: "mixed MIG profiles and whole GPUs", allocatable: map[resourceName]resource.Quantity{
			ResourceGPU: q("1"), "nvidia.com/mig-1g.10gb": q("7"), "nvidia.com/mig-3g.40gb": q("2"),
			"nvidia.com/mig-1g.10gb.shared": q("4")}, want: 14},
		{name: "a zero and a negative count", allocatable: map[resourceName]resource.Quantity{
			ResourceGPU: q("0"), "nvidia.com/mig-2g.20gb": q("-3")}, want: 0},
		{name: "counts that overflow stop at the maximum", allocatable: map[resourceName]resource.Quantity{
			ResourceGPU: *resource.NewQuantity(math.MaxInt64, resource.DecimalSI), ResourceGPUShared: q("2")}, want: math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AllocatableGPUs(tc.allocatable); got != tc.want {
				t.Errorf("AllocatableGPUs() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestIsGPUResource(t *testing.T) {
	for name, want := range map[string]bool{
		"nvidia.com/gpu": true, "nvidia.com/gpu.shared": true, "nvidia.com/mig-1g.5gb": true,
		"nvidia.com/mig-7g.80gb.shared": true, "nvidia.com/GH100_H100_SXM5_80GB": true, "nvidia.com/GRID_A100-4C": true,
		"nvidia.com/gpus": true, "amd.com/gpu": true, "gpu.intel.com/xe": true, "gpu.intel.com/millicores": false,
		"nvidia.com/": false, "example.com/gpu": false, "cpu": false, "": false,
	} {
		if got := IsGPUResource(name); got != want {
			t.Errorf("IsGPUResource(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAllocatableSharedGPUs(t *testing.T) {
	q := resource.MustParse
	got := AllocatableSharedGPUs(map[resourceName]resource.Quantity{
		ResourceGPU: q("2"), ResourceGPUShared: q("8"), "nvidia.com/mig-1g.10gb.shared": q("4"), "example.com/thing.shared": q("3")})
	if got != 12 {
		t.Errorf("AllocatableSharedGPUs() = %d, want 12 (the replicas of nvidia.com/gpu.shared and a MIG profile)", got)
	}
}
