package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// GPUSettings reads the GPU controller's GPUSettings
// (gpuv1alpha1.SettingsName): which DeviceClasses are GPUs for VMs, and
// which VMIs hold a device of each.
type GPUSettings interface {
	// GPUSettings returns the settings, and false when they do not exist
	// or the cache has not synced.
	GPUSettings() (*gpuv1alpha1.GPUSettingsSpec, bool)
}

// vmGPUConsumers judges the consumers of a tenant claim that hands out a
// GPU for VMs: a device of a DeviceClass a GPUClass sells to VMs
// (sourceKind ResourceClaim). As a GPU for VMs under an extended resource
// name goes only to KubeVirt's launcher pods of a VMI that holds a device
// (the gpu-pods policy), such a claim is reserved only for a pod a
// VirtualMachineInstance controls, and only while that VMI holds a
// GPUDevice of the same DeviceClass. The gpu-pods and gpu-pod-owners
// policies let only KubeVirt's controller make a pod that consumes claims
// under a VMI's control, so the owner reference read here is KubeVirt's.
//
// The consumers judged are every consumer when the allocation is new or
// changed, else those added (reserved).
func (v *Validator) vmGPUConsumers(ctx context.Context, ns string, claim *resourcev1.ResourceClaim, judged []types.UID) []violation {
	if v.cfg.GPUSettings == nil {
		return nil
	}
	settings, ok := v.cfg.GPUSettings.GPUSettings()
	if !ok {
		return []violation{{RuleLookup, guard.ReasonLookupFailed, "status.allocation",
			fmt.Sprintf("the GPU controller's settings (GPUSettings %s) are missing, so whether the claim hands out a GPU for VMs cannot be told", gpuv1alpha1.SettingsName)}}
	}
	vmClasses := settings.DeviceClasses
	var classes []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if c := requestClass(&claim.Spec, r.Request); slices.Contains(vmClasses, c) && !slices.Contains(classes, c) {
			classes = append(classes, c)
		}
	}
	if len(classes) == 0 {
		return nil
	}
	holders := settings.ClaimHolders
	var vs []violation
	for i, c := range claim.Status.ReservedFor {
		if !slices.Contains(judged, c.UID) || c.APIGroup != "" || c.Resource != "pods" {
			continue
		}
		path := fmt.Sprintf("status.reservedFor[%d]", i)
		pod, err := v.cfg.Cluster.Pod(ctx, ns, c.Name)
		switch {
		case err != nil:
			vs = append(vs, violation{RuleLookup, guard.ReasonLookupFailed, path,
				fmt.Sprintf("claim %s hands out %s, a GPU for VMs, and its consumer cannot be read: %v", claim.Name, classes[0], err)})
			continue
		case pod.UID != c.UID:
			vs = append(vs, violation{RuleLookup, guard.ReasonLookupFailed, path,
				fmt.Sprintf("claim %s hands out %s, a GPU for VMs, and its consumer pod %s is no longer the pod it names (uid %s)", claim.Name, classes[0], c.Name, c.UID)})
			continue
		}
		vmi := controllingVMI(pod)
		if vmi == nil {
			vs = append(vs, violation{RuleAllocation, guard.ReasonGPUResourceForbidden, path,
				fmt.Sprintf("claim %s hands out %s, a GPU for VMs; only the launcher pod of a VirtualMachineInstance that holds a GPUDevice of it may consume it, and pod %s is under no VMI's control", claim.Name, classes[0], pod.Name)})
			continue
		}
		for _, class := range classes {
			if slices.Contains(holders, gpuv1alpha1.ClaimHolder(ns, string(vmi.UID), class)) {
				continue
			}
			prefix := ns + "/" + string(vmi.UID) + "="
			if i := slices.IndexFunc(holders, func(h string) bool { return strings.HasPrefix(h, prefix) }); i >= 0 {
				vs = append(vs, violation{RuleAllocation, guard.ReasonGPUDeviceClassMismatch, path,
					fmt.Sprintf("claim %s hands out %s to pod %s, but its VirtualMachineInstance %s holds a GPUDevice of %s", claim.Name, class, pod.Name, vmi.Name, strings.TrimPrefix(holders[i], prefix))})
				continue
			}
			vs = append(vs, violation{RuleAllocation, guard.ReasonGPUDeviceNotHeld, path,
				fmt.Sprintf("claim %s hands out %s to pod %s of VirtualMachineInstance %s, but the GPU controller records no GPUDevice of it the VMI holds; a VMI reaches a GPU only through a device it holds", claim.Name, class, pod.Name, vmi.Name)})
		}
	}
	return vs
}

// requestClass is the DeviceClass of the request (or "<request>/<subrequest>")
// an allocation result names; empty when the spec has none.
func requestClass(spec *resourcev1.ResourceClaimSpec, request string) string {
	name, sub, hasSub := strings.Cut(request, "/")
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Name != name {
			continue
		}
		if !hasSub {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for j := range r.FirstAvailable {
			if r.FirstAvailable[j].Name == sub {
				return r.FirstAvailable[j].DeviceClassName
			}
		}
	}
	return ""
}

// controllingVMI is the controller owner reference of a pod when it is a
// KubeVirt VirtualMachineInstance.
func controllingVMI(pod *corev1.Pod) *metav1.OwnerReference {
	r := metav1.GetControllerOfNoCopy(pod)
	if r == nil || r.Kind != "VirtualMachineInstance" || !strings.HasPrefix(r.APIVersion, "kubevirt.io/") {
		return nil
	}
	return r
}
