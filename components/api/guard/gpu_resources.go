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
)

// IsGPUResource reports whether a resource of this name hands a pod a GPU,
// a MIG slice or a replica of either: one that AllocatableGPUs counts.
func IsGPUResource(name string) bool {
	return name == ResourceGPU || name == ResourceGPUShared || strings.HasPrefix(name, ResourceMIGPrefix)
}

// AllocatableGPUs counts what a node offers pods through GPU resources
// (IsGPUResource), given its status.allocatable. Callers of the evaluator
// pass it as the node's allocatableGPUs, which the evaluator checks against
// the devices in the node's evidence. The sum stops at math.MaxInt64.
func AllocatableGPUs[Name ~string](allocatable map[Name]resource.Quantity) int64 {
	var n int64
	for name, q := range allocatable {
		if !IsGPUResource(string(name)) {
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
