package evaluate

import (
	"strconv"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// gpuGap compares the GPUs the node offers pods (allocatable, nil when the
// caller does not know) with the devices its evidence lists, and explains
// why the evidence does not account for them, or returns "". Evidence
// that lists no device, or fewer than the node hands out, says nothing
// about the GPUs a pod may get; and a policy's GPU rules cannot pass on
// evidence that lists no device at all, unless the pod takes its GPUs only
// through DRA claims, whose devices are judged where they are allocated.
//
// An allocatable of 0 is not held against devices that the evidence lists:
// a node whose device plugin has not registered yet hands out no GPU while
// its evidence already describes the hardware, and the lab's mock evidence
// on kind nodes, which have no GPUs to allocate, relies on it.
//
// Replicas of shared GPUs (shared, nil when none) mean shared, whatever
// the evidence says: evidence that describes every device as unshared
// does not account for them.
func (in *input) gpuGap(allocatable, shared *int64, devices []v1alpha1.GPUDevice) string {
	offered := int64(0)
	if allocatable != nil {
		offered = *allocatable
	}
	switch {
	case shared != nil && *shared > 0 && len(devices) > 0 && !anyReplicated(devices):
		return "the node offers " + strconv.FormatInt(*shared, 10) +
			" replica(s) of shared GPUs to pods (allocatableSharedGPUs, such as nvidia.com/gpu.shared) but the evidence describes no device as time-sliced or MPS-shared"
	case len(devices) == 0 && offered > 0:
		return "the node offers " + strconv.FormatInt(offered, 10) +
			" GPU(s) to pods (allocatableGPUs) but the evidence lists no GPU device"
	case len(devices) == 0 && in.gpuRules && !in.devicesByClaim:
		return "policy " + in.policyQ + " " + gpuRulesOf(in.sharing, in.cc) + ", but the evidence lists no GPU device to judge"
	case offered > 0 && !countsAgree(offered, devices):
		return countGap(offered, devices)
	}
	return ""
}

// countsAgree reports whether offering n GPUs is consistent with the
// devices, of which there is at least one: one each, or, when every device
// is time-sliced or shared by MPS, the same number of replicas each.
func countsAgree(n int64, devices []v1alpha1.GPUDevice) bool {
	d := int64(len(devices))
	return n == d || (replicated(devices) && n%d == 0)
}

// replicated reports whether the device plugin may advertise each device
// several times: time-slicing and MPS hand out replicas of a GPU or of a
// MIG slice.
func replicated(devices []v1alpha1.GPUDevice) bool {
	for i := range devices {
		switch devices[i].SliceSharing() {
		case v1alpha1.SharingTimeSlicing, v1alpha1.SharingMPS:
		default:
			return false
		}
	}
	return true
}

// anyReplicated reports whether some device is time-sliced or shared by
// MPS, so that the device plugin may advertise replicas of it.
func anyReplicated(devices []v1alpha1.GPUDevice) bool {
	for i := range devices {
		switch devices[i].SliceSharing() {
		case v1alpha1.SharingTimeSlicing, v1alpha1.SharingMPS:
			return true
		}
	}
	return false
}

// countGap explains why offering n GPUs does not agree with the devices.
func countGap(n int64, devices []v1alpha1.GPUDevice) string {
	d := strconv.Itoa(len(devices))
	offer := "the node offers " + strconv.FormatInt(n, 10) + " GPU(s) to pods (allocatableGPUs)"
	if replicated(devices) {
		return offer + " but the evidence lists " + d +
			" time-sliced or MPS-shared GPU device(s), which are offered in equal numbers of replicas: a multiple of " + d
	}
	return offer + " but the evidence lists " + d +
		" GPU device(s), and only time-sliced or MPS-shared devices are offered more than once"
}

// gpuRulesOf describes the policy's rules about GPUs, for messages.
func gpuRulesOf(sharing *v1alpha1.GPUSharingPolicy, cc *v1alpha1.ConfidentialComputingPolicy) string {
	var rules string
	if sharing != nil {
		rules = "restricts GPU sharing modes"
	}
	if cc != nil && cc.GPUCCMode != "" {
		if rules != "" {
			rules += " and "
		}
		rules += "requires GPU CC mode " + quote(string(cc.GPUCCMode))
	}
	return rules
}
