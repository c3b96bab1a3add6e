package guard

import (
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Extended resources through which the NVIDIA device plugin offers GPUs to
// pods.
const (
	// ResourceGPU is a whole GPU, a MIG slice under the single MIG strategy,
	// or a replica of a time-sliced or MPS-shared GPU.
	ResourceGPU = "nvidia.com/gpu"
	// ResourceGPUShared is a replica of a shared GPU when the device plugin
	// renames shared resources.
	ResourceGPUShared = "nvidia.com/gpu.shared"
	// ResourceMIGPrefix starts the resource of each MIG profile under the
	// mixed MIG strategy, e.g. nvidia.com/mig-1g.10gb (and, when shared and
	// renamed, nvidia.com/mig-1g.10gb.shared).
	ResourceMIGPrefix = "nvidia.com/mig-"
	// ResourceSharedSuffix ends the name of a replica resource: the device
	// plugin's renamed time-sliced or MPS-shared GPUs and MIG slices.
	ResourceSharedSuffix = ".shared"
)

// gpuDomains are the extended-resource domains of GPU vendors' device
// plugins. Every resource under one names a GPU, a slice or a replica of
// one: the NVIDIA device plugin's nvidia.com/gpu, MIG and replica
// resources, KubeVirt's passthrough and mediated-device names
// (nvidia.com/GH100_H100_SXM5_80GB, nvidia.com/GRID_A100-4C), AMD's
// amd.com/gpu and Intel's gpu.intel.com/i915 and xe.
var gpuDomains = []string{"nvidia.com/", "amd.com/", "gpu.intel.com/"}

// gpuCapacities are resources of a GPU vendor's domain that measure a
// shared GPU's capacity rather than count devices; the device resources
// beside them are counted.
var gpuCapacities = []string{"gpu.intel.com/millicores", "gpu.intel.com/memory.max", "gpu.intel.com/tiles"}

// IsGPUResource reports whether a resource of this name hands a pod a GPU,
// a GPU slice or a replica of either, whatever the name: any resource of a
// GPU vendor's domain but those that measure capacity. A GPU is judged by
// what it is, not by the names a device plugin happens to use, so a name
// no rule knows still counts and must be accounted for by evidence.
func IsGPUResource(name string) bool {
	for _, c := range gpuCapacities {
		if name == c {
			return false
		}
	}
	for _, d := range gpuDomains {
		if strings.HasPrefix(name, d) && len(name) > len(d) {
			return true
		}
	}
	return false
}

// IsSharedGPUResource reports whether a GPU resource hands out replicas of
// a shared GPU or slice (time-slicing or MPS), whatever the evidence says:
// the device plugin's renamed replicas, nvidia.com/gpu.shared and
// nvidia.com/mig-<profile>.shared.
func IsSharedGPUResource(name string) bool {
	return IsGPUResource(name) && strings.HasSuffix(name, ResourceSharedSuffix)
}

// AllocatableGPUs counts what a node offers pods through GPU resources
// (IsGPUResource), given its status.allocatable. Callers of the evaluator
// pass it as the node's allocatableGPUs, which the evaluator checks against
// the devices in the node's evidence. The sum stops at math.MaxInt64.
func AllocatableGPUs[Name ~string](allocatable map[Name]resource.Quantity) int64 {
	return sumOf(allocatable, IsGPUResource)
}

// AllocatableSharedGPUs counts the replicas of shared GPUs a node offers
// pods (IsSharedGPUResource), a part of AllocatableGPUs. Callers of the
// evaluator pass it as the node's allocatableSharedGPUs: evidence must
// describe those devices as shared.
func AllocatableSharedGPUs[Name ~string](allocatable map[Name]resource.Quantity) int64 {
	return sumOf(allocatable, IsSharedGPUResource)
}

func sumOf[Name ~string](allocatable map[Name]resource.Quantity, counts func(string) bool) int64 {
	var n int64
	for name, q := range allocatable {
		if !counts(string(name)) {
			continue
		}
		v := q.Value()
		switch {
		case v <= 0:
		case v > math.MaxInt64-n:
			return math.MaxInt64
		default:
			n += v
		}
	}
	return n
}

// SameGPUOffer reports whether two versions of a node's status.allocatable
// offer pods the same GPUs and the same replicas of shared ones: what
// decides whether a node's evaluation must be done again.
func SameGPUOffer[Name ~string](a, b map[Name]resource.Quantity) bool {
	return AllocatableGPUs(a) == AllocatableGPUs(b) && AllocatableSharedGPUs(a) == AllocatableSharedGPUs(b)
}
