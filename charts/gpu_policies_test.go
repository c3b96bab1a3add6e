package charts

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Fixtures of the GPU device policies' tests.
const (
	kubevirtController = "system:serviceaccount:kubevirt:kubevirt-controller"
	gpuTenantNS        = "acme"
	gpuTenant          = "alice"
	gpuResource        = "nvidia.com/GH100_H100_SXM5_80GB"
	deviceLabel        = "gpu.guard.xila.us/device"
	usageLabel         = "gpu.guard.xila.us/usage"
	templateLabel      = "gpu.guard.xila.us/template-device"
	deviceFinalizer    = "gpu.guard.xila.us/device-protection"
	classFinalizer     = "gpu.guard.xila.us/class-protection"
)

var (
	gvrVMI      = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	gvrVM       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	gvrVMIRS    = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancereplicasets"}
	gvrPool     = schema.GroupVersionResource{Group: "pool.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinepools"}
	gvrIT       = schema.GroupVersionResource{Group: "instancetype.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineinstancetypes"}
	gvrPod      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrCM       = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrDevice   = schema.GroupVersionResource{Group: "gpu.guard.xila.us", Version: "v1alpha1", Resource: "gpudevices"}
	gvrClass    = schema.GroupVersionResource{Group: "gpu.guard.xila.us", Version: "v1alpha1", Resource: "gpuclasses"}
	platformSA  = []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS, "system:authenticated"}
	tenantGroup = []string{"acme-developers", "system:authenticated"}
)

// settingsCM is the GPU controller's GPUSettings with the resource names
// (comma-separated), and the VMI vm1 (UID u1) of the tenant's namespace
// holding a device.
func settingsCM(names string) map[string]any {
	return settingsHolding(names, gpuTenantNS+"/u0,"+gpuTenantNS+"/u1")
}

// settingsHolding is the GPUSettings with the resource names and holders,
// each comma-separated.
func settingsHolding(names, holders string) map[string]any {
	list := func(s string) []any {
		out := []any{}
		for v := range strings.SplitSeq(s, ",") {
			if v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	return map[string]any{"apiVersion": "gpu.guard.xila.us/v1alpha1", "kind": "GPUSettings",
		"metadata": map[string]any{"name": "xila-guard-gpu-settings", "namespace": releaseNS},
		"spec":     map[string]any{"resourceNames": list(names), "kubevirtController": kubevirtController, "holders": list(holders)}}
}

var settings = settingsCM("nvidia.com/A10," + gpuResource)

func meta(name string, labels map[string]any, extra ...any) map[string]any {
	m := map[string]any{"name": name, "namespace": gpuTenantNS}
	if labels != nil {
		m["labels"] = labels
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func kobj(apiVersion, kind string, metadata, spec map[string]any) map[string]any {
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": metadata}
	if spec != nil {
		o["spec"] = spec
	}
	return o
}

// vmiSpec is a VMI spec; devices, resources and claims are optional.
func vmiSpec(devices map[string]any, resources map[string]any, claims []any) map[string]any {
	domain := map[string]any{"devices": map[string]any{}}
	for k, v := range devices {
		domain["devices"].(map[string]any)[k] = v
	}
	if resources != nil {
		domain["resources"] = resources
	}
	s := map[string]any{"domain": domain}
	if claims != nil {
		s["resourceClaims"] = claims
	}
	return s
}

var (
	withGPU  = vmiSpec(map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "deviceName": gpuResource}}}, nil, nil)
	withHost = vmiSpec(map[string]any{"hostDevices": []any{map[string]any{"name": "nic", "deviceName": "intel.com/E810"}}}, nil, nil)
	withDRA  = vmiSpec(nil, nil, []any{map[string]any{"name": "gpu-claim", "resourceClaimName": "h100"}})
	// withClaimGPU takes its GPU through the DRA claim of a template, as
	// KubeVirt's gpus entries name a claim's request.
	withClaimGPU = vmiSpec(map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}}}, nil,
		[]any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "vm-gpu"}})
	withRes  = vmiSpec(nil, map[string]any{"limits": map[string]any{gpuResource: "1"}}, nil)
	withCPU  = vmiSpec(nil, map[string]any{"requests": map[string]any{"cpu": "2", "memory": "4Gi"}}, nil)
	noGPU    = vmiSpec(nil, nil, nil)
	labelled = map[string]any{deviceLabel: "h100-a"}
)

func vmi(labels map[string]any, spec map[string]any) map[string]any {
	return kobj("kubevirt.io/v1", "VirtualMachineInstance", meta("vm1", labels), spec)
}

// template wraps a VMI spec as a VM's or replica set's template.
func template(labels map[string]any, spec map[string]any) map[string]any {
	t := map[string]any{"spec": spec}
	if labels != nil {
		t["metadata"] = map[string]any{"labels": labels}
	}
	return t
}

func pod(name string, owner map[string]any, containers []any, init []any) map[string]any {
	m := meta(name, nil)
	if owner != nil {
		m["ownerReferences"] = []any{owner}
	}
	spec := map[string]any{"containers": containers}
	if init != nil {
		spec["initContainers"] = init
	}
	return kobj("v1", "Pod", m, spec)
}

// consuming is the pod with a ResourceClaim of a template in its spec.
func consuming(p map[string]any) map[string]any {
	out := with(p, "spec", with(p["spec"].(map[string]any), "resourceClaims", []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "vm-gpu"}}))
	return out
}

// owned is the pod with owner as its only owner reference.
func owned(p map[string]any, owner map[string]any) map[string]any {
	m := with(p["metadata"].(map[string]any), "ownerReferences", []any{owner})
	if owner == nil {
		delete(m, "ownerReferences")
	}
	return with(p, "metadata", m)
}

func container(resources map[string]any) map[string]any {
	return map[string]any{"name": "c", "image": "registry.example/c@sha256:" + strings.Repeat("a", 64), "resources": resources}
}

var (
	vmiOwner     = map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1", "uid": "u1", "controller": true}
	vmiNotCtrl   = map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1", "uid": "u1"}
	gpuLimits    = map[string]any{"limits": map[string]any{gpuResource: "1"}}
	gpuRequests  = map[string]any{"requests": map[string]any{"nvidia.com/A10": "1"}}
	plainLimits  = map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1", "cpu": "1"}}
	deviceSpec   = map[string]any{"className": "h100", "count": int64(1)}
	classSpecOld = map[string]any{"vendor": "nvidia", "model": "H100-SXM5-80GB", "mode": "Passthrough", "memory": "80Gi",
		"maxCount": int64(8), "sourceKind": "HostDevice", "resourceName": gpuResource, "nodeSelector": map[string]any{"gpu": "h100"}}
)

func device(name string, labels map[string]any, finalizers ...any) map[string]any {
	m := meta(name, labels)
	if len(finalizers) > 0 {
		m["finalizers"] = finalizers
	}
	return kobj("gpu.guard.xila.us/v1alpha1", "GPUDevice", m, deviceSpec)
}

func class(name string, spec map[string]any, finalizers []any, deleting bool) map[string]any {
	m := map[string]any{"name": name}
	if finalizers != nil {
		m["finalizers"] = finalizers
	}
	if deleting {
		m["deletionTimestamp"] = "2026-12-01T10:00:00Z"
	}
	return kobj("gpu.guard.xila.us/v1alpha1", "GPUClass", m, spec)
}

func with(m map[string]any, key string, value any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	out[key] = value
	return out
}

// judgedDevice is a GPUDevice of the class selling gpuResource as the GPU
// controller judged it, held by the VMI holder ("" for none).
func judgedDevice(name, holder string) map[string]any {
	d := device(name, nil)
	status := map[string]any{"phase": "Available", "resourceName": gpuResource}
	if holder != "" {
		status["phase"] = "Held"
		status["heldBy"] = map[string]any{"name": holder, "uid": "uid-" + holder, "since": "2026-12-01T00:00:00Z"}
	}
	return with(d, "status", status)
}

func configMap(labels map[string]any) map[string]any {
	return kobj("v1", "ConfigMap", meta("cm", labels), nil)
}

// gpuPolicyCases: what each policy admits and refuses. want is the reason
// code the refusal message starts with, "" to admit, "error" for a refusal
// by failurePolicy Fail.
var gpuPolicyCases = []struct {
	policy, name string
	req          request
	want         string
}{
	// 3. The reserved usage-label key.
	{"xila-guard-gpu-usage-label", "tenant adds the key on create", request{op: admission.Create, gvr: gvrCM, object: configMap(map[string]any{usageLabel: "acme.h100-a"}), user: gpuTenant}, "USAGE_LABEL_RESERVED"},
	{"xila-guard-gpu-usage-label", "a cluster admin adds it too", request{op: admission.Create, gvr: gvrCM, object: configMap(map[string]any{usageLabel: "x"}), user: "admin", groups: []string{"system:masters"}}, "USAGE_LABEL_RESERVED"},
	{"xila-guard-gpu-usage-label", "other labels pass", request{op: admission.Create, gvr: gvrCM, object: configMap(map[string]any{"app": "x"}), user: gpuTenant}, ""},
	{"xila-guard-gpu-usage-label", "no labels at all", request{op: admission.Create, gvr: gvrCM, object: configMap(nil), user: gpuTenant}, ""},
	{"xila-guard-gpu-usage-label", "an object without metadata", request{op: admission.Create, gvr: gvrCM, object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, user: gpuTenant}, ""},
	{"xila-guard-gpu-usage-label", "update adds the key", request{op: admission.Update, gvr: gvrCM, old: configMap(nil), object: configMap(map[string]any{usageLabel: "x"}), user: gpuTenant}, "USAGE_LABEL_RESERVED"},
	{"xila-guard-gpu-usage-label", "update keeps the key", request{op: admission.Update, gvr: gvrCM, old: configMap(map[string]any{usageLabel: "x"}), object: configMap(map[string]any{usageLabel: "x", "b": "c"}), user: gpuTenant}, ""},
	{"xila-guard-gpu-usage-label", "update drops the key", request{op: admission.Update, gvr: gvrCM, old: configMap(map[string]any{usageLabel: "x"}), object: configMap(nil), user: gpuTenant}, ""},
	{"xila-guard-gpu-usage-label", "update changes its value", request{op: admission.Update, gvr: gvrCM, old: configMap(map[string]any{usageLabel: "x"}), object: configMap(map[string]any{usageLabel: "y"}), user: gpuTenant}, "USAGE_LABEL_RESERVED"},
	{"xila-guard-gpu-usage-label", "a subresource write adds it", request{op: admission.Update, gvr: gvrPod, subresource: "status", old: pod("p", nil, []any{container(nil)}, nil), object: kobj("v1", "Pod", meta("p", map[string]any{usageLabel: "x"}), map[string]any{"containers": []any{container(nil)}}), user: "system:node:n1"}, "USAGE_LABEL_RESERVED"},

	// 1. VMs, replica sets, pools and instance types carry a GPU only with the device label.
	// 1b. The device a VMI names is its own.
	{"xila-guard-gpu-device-holder", "the device another VMI holds", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withGPU), params: judgedDevice("h100-a", "vm-other"), user: gpuTenant}, "GPU_DEVICE_HELD"},
	{"xila-guard-gpu-device-holder", "the device it holds itself", request{op: admission.Update, gvr: gvrVMI, old: vmi(labelled, withGPU), object: vmi(labelled, withGPU), params: judgedDevice("h100-a", "vm1"), user: kubevirtController}, ""},
	{"xila-guard-gpu-device-holder", "a free device of its class", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withGPU), params: judgedDevice("h100-a", ""), user: gpuTenant}, ""},
	{"xila-guard-gpu-device-holder", "another device of the namespace", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withGPU), params: judgedDevice("h100-b", "vm-other"), user: gpuTenant}, ""},
	{"xila-guard-gpu-device-holder", "another GPU than its class offers", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, vmiSpec(nil, map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}, nil)), params: judgedDevice("h100-a", ""), user: gpuTenant}, "GPU_DEVICE_CLASS_MISMATCH"},
	{"xila-guard-gpu-device-holder", "a host device other than its class offers", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withHost), params: judgedDevice("h100-a", ""), user: gpuTenant}, "GPU_DEVICE_CLASS_MISMATCH"},
	{"xila-guard-gpu-device-holder", "a GPU through a DRA claim, its device of a class of dynamic resource allocation", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withClaimGPU), params: with(judgedDevice("h100-a", ""), "status", map[string]any{"phase": "Available", "resourceName": "gpu.example.com"}), user: gpuTenant}, ""},
	{"xila-guard-gpu-device-holder", "a GPU through a DRA claim and one by name its DRA class does not offer", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, vmiSpec(map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}, map[string]any{"name": "gpu2", "deviceName": gpuResource}}}, nil, []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "vm-gpu"}})), params: with(judgedDevice("h100-a", ""), "status", map[string]any{"phase": "Available", "resourceName": "gpu.example.com"}), user: gpuTenant}, "GPU_DEVICE_CLASS_MISMATCH"},
	{"xila-guard-gpu-device-holder", "a GPU through a DRA claim, the device another VMI holds", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withClaimGPU), params: judgedDevice("h100-a", "vm-other"), user: gpuTenant}, "GPU_DEVICE_HELD"},
	{"xila-guard-gpu-device-holder", "a device the controller has not judged yet", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withGPU), params: device("h100-a", nil), user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "gpus without the label", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, withGPU), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "gpus with the label", request{op: admission.Create, gvr: gvrVMI, object: vmi(labelled, withGPU), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "an empty label", request{op: admission.Create, gvr: gvrVMI, object: vmi(map[string]any{deviceLabel: ""}, withGPU), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "a host device without the label", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, withHost), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "a DRA claim without the label", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, withDRA), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "a GPU resource without the label", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, withRes), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "KubeVirt's controller is held to it too", request{op: admission.Update, gvr: gvrVMI, old: vmi(labelled, withGPU), object: vmi(nil, withGPU), params: settings, user: kubevirtController}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "cpu and memory only", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, withCPU), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "no devices", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, noGPU), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "a resource no class sells", request{op: admission.Create, gvr: gvrVMI, object: vmi(nil, vmiSpec(nil, map[string]any{"limits": map[string]any{"example.com/fpga": "1"}}, nil)), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "a VM's template gpus without the label", request{op: admission.Create, gvr: gvrVM, object: kobj("kubevirt.io/v1", "VirtualMachine", meta("vm", nil), map[string]any{"template": template(nil, withGPU)}), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "the label on the VM, not its template", request{op: admission.Create, gvr: gvrVM, object: kobj("kubevirt.io/v1", "VirtualMachine", meta("vm", labelled), map[string]any{"template": template(nil, withGPU)}), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "the label on the VM's template", request{op: admission.Create, gvr: gvrVM, object: kobj("kubevirt.io/v1", "VirtualMachine", meta("vm", nil), map[string]any{"template": template(labelled, withGPU)}), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "a replica set's host device without the label", request{op: admission.Create, gvr: gvrVMIRS, object: kobj("kubevirt.io/v1", "VirtualMachineInstanceReplicaSet", meta("rs", nil), map[string]any{"template": template(map[string]any{"app": "x"}, withHost)}), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "a replica set without GPUs", request{op: admission.Create, gvr: gvrVMIRS, object: kobj("kubevirt.io/v1", "VirtualMachineInstanceReplicaSet", meta("rs", nil), map[string]any{"template": template(nil, noGPU)}), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-vm-devices", "a pool's GPU resource without the label", request{op: admission.Create, gvr: gvrPool, object: kobj("pool.kubevirt.io/v1beta1", "VirtualMachinePool", meta("pool", nil), map[string]any{"virtualMachineTemplate": map[string]any{"spec": map[string]any{"template": template(nil, withRes)}}}), params: settings, user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-vm-devices", "a pool with the label", request{op: admission.Create, gvr: gvrPool, object: kobj("pool.kubevirt.io/v1beta1", "VirtualMachinePool", meta("pool", nil), map[string]any{"virtualMachineTemplate": map[string]any{"spec": map[string]any{"template": template(labelled, withGPU)}}}), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-instancetype-devices", "an instance type's gpus without the label", request{op: admission.Create, gvr: gvrIT, object: kobj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", meta("big", nil), map[string]any{"cpu": map[string]any{"guest": int64(4)}, "memory": map[string]any{"guest": "8Gi"}, "gpus": []any{map[string]any{"name": "g", "deviceName": gpuResource}}}), user: gpuTenant}, "GPU_DEVICE_REQUIRED"},
	{"xila-guard-gpu-instancetype-devices", "an instance type with the label", request{op: admission.Create, gvr: gvrIT, object: kobj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", meta("big", labelled), map[string]any{"cpu": map[string]any{"guest": int64(4)}, "memory": map[string]any{"guest": "8Gi"}, "hostDevices": []any{map[string]any{"name": "g", "deviceName": gpuResource}}}), user: gpuTenant}, ""},
	{"xila-guard-gpu-instancetype-devices", "an instance type without devices", request{op: admission.Create, gvr: gvrIT, object: kobj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", meta("small", nil), map[string]any{"cpu": map[string]any{"guest": int64(1)}, "memory": map[string]any{"guest": "1Gi"}}), user: gpuTenant}, ""},

	// 2. Pods request a GPU resource only as KubeVirt's launcher pods of a VMI.
	{"xila-guard-gpu-pods", "a tenant's pod with a GPU limit", request{op: admission.Create, gvr: gvrPod, object: pod("p", nil, []any{container(gpuLimits)}, nil), params: settings, user: gpuTenant, groups: tenantGroup}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "a tenant's copy of a launcher pod", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), params: settings, user: gpuTenant}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "a GPU request in an init container", request{op: admission.Create, gvr: gvrPod, object: pod("p", nil, []any{container(nil)}, []any{container(gpuRequests)}), params: settings, user: gpuTenant}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, for a VMI it controls", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), params: settings, user: kubevirtController}, ""},
	{"xila-guard-gpu-pods", "KubeVirt's controller, for a VMI that holds no device", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), params: settingsHolding("nvidia.com/A10,"+gpuResource, gpuTenantNS+"/u2"), user: kubevirtController}, "GPU_DEVICE_NOT_HELD"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, for a VMI of that UID in another namespace", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), params: settingsHolding("nvidia.com/A10,"+gpuResource, "other/u1"), user: kubevirtController}, "GPU_DEVICE_NOT_HELD"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, while no VMI holds a device", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), params: settingsHolding("nvidia.com/A10,"+gpuResource, ""), user: kubevirtController}, "GPU_DEVICE_NOT_HELD"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, for a pod without a GPU of a VMI that holds none", request{op: admission.Create, gvr: gvrPod, object: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(plainLimits)}, nil), params: settingsHolding("nvidia.com/A10,"+gpuResource, ""), user: kubevirtController}, ""},
	{"xila-guard-gpu-pods", "KubeVirt's controller with no owner", request{op: admission.Create, gvr: gvrPod, object: pod("p", nil, []any{container(gpuLimits)}, nil), params: settings, user: kubevirtController}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, VMI owner that is not the controller", request{op: admission.Create, gvr: gvrPod, object: pod("p", vmiNotCtrl, []any{container(gpuLimits)}, nil), params: settings, user: kubevirtController}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "another service account of KubeVirt's namespace", request{op: admission.Create, gvr: gvrPod, object: pod("p", vmiOwner, []any{container(gpuLimits)}, nil), params: settings, user: "system:serviceaccount:kubevirt:virt-handler"}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "a resource no class sells", request{op: admission.Create, gvr: gvrPod, object: pod("p", nil, []any{container(plainLimits)}, nil), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-pods", "no class at all", request{op: admission.Create, gvr: gvrPod, object: pod("p", nil, []any{container(gpuLimits)}, nil), params: settingsCM(""), user: gpuTenant}, ""},

	// 2b. Pods that consume claims under a VMI's control are KubeVirt's.
	{"xila-guard-gpu-pods", "a tenant's pod that consumes claims under a VMI's control", request{op: admission.Create, gvr: gvrPod, object: consuming(pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(nil)}, nil)), params: settings, user: gpuTenant, groups: tenantGroup}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pods", "KubeVirt's controller, a launcher pod that consumes claims", request{op: admission.Create, gvr: gvrPod, object: consuming(pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(nil)}, nil)), params: settings, user: kubevirtController}, ""},
	{"xila-guard-gpu-pods", "a tenant's pod that consumes claims under no VMI", request{op: admission.Create, gvr: gvrPod, object: consuming(pod("p", nil, []any{container(nil)}, nil)), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-pods", "a tenant's pod under a VMI's control that consumes no claim", request{op: admission.Create, gvr: gvrPod, object: pod("p", vmiOwner, []any{container(nil)}, nil), params: settings, user: gpuTenant}, ""},
	{"xila-guard-gpu-pod-owners", "a tenant puts its pod that consumes claims under a VMI's control", request{op: admission.Update, gvr: gvrPod, old: consuming(pod("p", nil, []any{container(nil)}, nil)), object: consuming(pod("p", vmiOwner, []any{container(nil)}, nil)), user: gpuTenant, groups: tenantGroup}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pod-owners", "KubeVirt's controller may not either", request{op: admission.Update, gvr: gvrPod, old: consuming(pod("p", nil, []any{container(nil)}, nil)), object: consuming(pod("p", vmiOwner, []any{container(nil)}, nil)), user: kubevirtController}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pod-owners", "another VMI takes over a launcher pod", request{op: admission.Update, gvr: gvrPod, old: consuming(pod("p", vmiOwner, []any{container(nil)}, nil)), object: consuming(owned(pod("p", nil, []any{container(nil)}, nil), with(vmiOwner, "uid", "u2"))), user: gpuTenant}, "GPU_RESOURCE_FORBIDDEN"},
	{"xila-guard-gpu-pod-owners", "a launcher pod updated under the same VMI", request{op: admission.Update, gvr: gvrPod, old: consuming(pod("p", vmiOwner, []any{container(nil)}, nil)), object: consuming(owned(pod("p", map[string]any{}, []any{container(nil)}, nil), vmiOwner)), user: gpuTenant}, ""},
	{"xila-guard-gpu-pod-owners", "the garbage collector removes the owner", request{op: admission.Update, gvr: gvrPod, old: consuming(pod("p", vmiOwner, []any{container(nil)}, nil)), object: consuming(pod("p", nil, []any{container(nil)}, nil)), user: "system:serviceaccount:kube-system:generic-garbage-collector"}, ""},
	{"xila-guard-gpu-pod-owners", "a pod that consumes no claim gains a VMI owner", request{op: admission.Update, gvr: gvrPod, old: pod("p", nil, []any{container(nil)}, nil), object: pod("p", vmiOwner, []any{container(nil)}, nil), user: gpuTenant}, ""},

	// 4. A device's finalizer and template-device label are the platform's.
	{"xila-guard-gpu-device-guard", "a tenant orders a device", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", nil), user: gpuTenant, groups: tenantGroup}, ""},
	{"xila-guard-gpu-device-guard", "a tenant orders one with the finalizer", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", nil, deviceFinalizer), user: gpuTenant}, "DEVICE_FIELD_PLATFORM_ONLY"},
	{"xila-guard-gpu-device-guard", "a tenant orders one marked as a template device", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", map[string]any{templateLabel: "vm1"}), user: gpuTenant}, "DEVICE_FIELD_PLATFORM_ONLY"},
	{"xila-guard-gpu-device-guard", "a tenant removes the finalizer", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil, deviceFinalizer), object: device("h100-a", nil), user: gpuTenant}, "DEVICE_FIELD_PLATFORM_ONLY"},
	{"xila-guard-gpu-device-guard", "a tenant changes the template label", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", map[string]any{templateLabel: "vm1"}), object: device("h100-a", map[string]any{templateLabel: "vm2"}), user: gpuTenant}, "DEVICE_FIELD_PLATFORM_ONLY"},
	{"xila-guard-gpu-device-guard", "a tenant removes the template label", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", map[string]any{templateLabel: "vm1"}), object: device("h100-a", nil), user: gpuTenant}, "DEVICE_FIELD_PLATFORM_ONLY"},
	{"xila-guard-gpu-device-guard", "a tenant adds the API server's orphan finalizer", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil, deviceFinalizer), object: device("h100-a", map[string]any{"team": "a"}, deviceFinalizer, "orphan"), user: gpuTenant}, ""},
	{"xila-guard-gpu-device-guard", "the GPU controller adds the finalizer", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil), object: device("h100-a", nil, deviceFinalizer), user: "system:serviceaccount:" + releaseNS + ":xila-guard-gpudevices", groups: platformSA}, ""},
	{"xila-guard-gpu-device-guard", "kube-controller-manager removes it", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil, deviceFinalizer), object: device("h100-a", nil), user: "system:kube-controller-manager"}, ""},
	{"xila-guard-gpu-device-guard", "a cluster admin changes the label", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", map[string]any{templateLabel: "vm1"}), object: device("h100-a", nil), user: "admin", groups: []string{"system:masters"}}, ""},
	{"xila-guard-gpu-device-guard", "a platformCallers group", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil, deviceFinalizer), object: device("h100-a", nil), user: "ops", groups: []string{"platform-operators"}}, ""},
	{"xila-guard-gpu-device-guard", "a service account of a tenant namespace", request{op: admission.Update, gvr: gvrDevice, old: device("h100-a", nil, deviceFinalizer), object: device("h100-a", nil), user: "system:serviceaccount:acme:default", groups: []string{"system:serviceaccounts", "system:serviceaccounts:acme"}}, "DEVICE_FIELD_PLATFORM_ONLY"},

	// 5. What a protected class sells is immutable.
	{"xila-guard-gpu-class-offer", "a protected class changes its vendor", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(classSpecOld, "vendor", "amd"), []any{classFinalizer}, false), user: "admin", groups: []string{"system:masters"}}, "GPU_CLASS_OFFER_IMMUTABLE"},
	{"xila-guard-gpu-class-offer", "a protected class changes its memory", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(classSpecOld, "memory", "40Gi"), []any{classFinalizer}, false), user: "admin"}, "GPU_CLASS_OFFER_IMMUTABLE"},
	{"xila-guard-gpu-class-offer", "a protected class changes maxCount", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(classSpecOld, "maxCount", int64(2)), []any{classFinalizer}, false), user: "admin"}, "GPU_CLASS_OFFER_IMMUTABLE"},
	{"xila-guard-gpu-class-offer", "a protected class gains a profile", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(classSpecOld, "profile", "3g.40gb"), []any{classFinalizer}, false), user: "admin"}, "GPU_CLASS_OFFER_IMMUTABLE"},
	{"xila-guard-gpu-class-offer", "the write that drops the finalizer changes the model", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(classSpecOld, "model", "H200"), nil, false), user: "admin"}, "GPU_CLASS_OFFER_IMMUTABLE"},
	{"xila-guard-gpu-class-offer", "resourceName and nodeSelector move", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, []any{classFinalizer}, false), object: class("h100", with(with(classSpecOld, "resourceName", "nvidia.com/H100"), "nodeSelector", map[string]any{"rack": "b"}), []any{classFinalizer}, false), user: "admin"}, ""},
	{"xila-guard-gpu-class-offer", "an unprotected class changes its model", request{op: admission.Update, gvr: gvrClass, old: class("h100", classSpecOld, nil, false), object: class("h100", with(classSpecOld, "model", "H200"), nil, false), user: "admin"}, ""},

	// 6. A class being deleted takes no new orders.
	{"xila-guard-gpu-class-deleting", "an order of a class being deleted", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", nil), params: class("h100", classSpecOld, []any{classFinalizer}, true), user: gpuTenant}, "GPU_CLASS_DELETING"},
	{"xila-guard-gpu-class-deleting", "another class being deleted", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", nil), params: class("a10", classSpecOld, []any{classFinalizer}, true), user: gpuTenant}, ""},
	{"xila-guard-gpu-class-deleting", "an order of a live class", request{op: admission.Create, gvr: gvrDevice, object: device("h100-a", nil), params: class("h100", classSpecOld, []any{classFinalizer}, false), user: gpuTenant}, ""},
}

// gpuPolicyGuarantees gives each GPU device policy the ID of the row of
// docs/security.md it proves.
var gpuPolicyGuarantees = map[string]string{
	"xila-guard-gpu-vm-devices":           "G-GPU-VM-DEVICES",
	"xila-guard-gpu-instancetype-devices": "G-GPU-VM-DEVICES",
	"xila-guard-gpu-device-holder":        "G-GPU-VM-DEVICES",
	"xila-guard-gpu-pods":                 "G-GPU-PODS",
	"xila-guard-gpu-pod-owners":           "G-GPU-PODS",
	"xila-guard-gpu-usage-label":          "G-GPU-USAGE-LABEL",
	"xila-guard-gpu-device-guard":         "G-GPU-DEVICE-FIELDS",
	"xila-guard-gpu-class-offer":          "G-GPU-CLASS-OFFER",
	"xila-guard-gpu-class-deleting":       "G-GPU-CLASS-OFFER",
}

// TestGPUDevicePolicies evaluates the GPU device policies, as rendered by
// the chart, on the requests above, compiled in the CEL environments of
// each supported Kubernetes minor.
func TestGPUDevicePolicies(t *testing.T) {
	policies := renderedPolicies(t, readValues(t, "gpu-devices"))
	seen := map[string]bool{}
	for _, v := range celVersions {
		compiled := map[string]compiledPolicy{}
		for _, tc := range gpuPolicyCases {
			p, ok := policies[tc.policy]
			if !ok {
				t.Fatalf("the chart renders no policy %s", tc.policy)
			}
			seen[tc.policy] = true
			c, ok := compiled[tc.policy]
			if !ok {
				c = compilePolicy(t, v, p)
				compiled[tc.policy] = c
			}
			tc.req.namespace = gpuTenantNS
			if tc.req.gvr == gvrClass {
				tc.req.namespace = ""
			}
			id, ok := gpuPolicyGuarantees[tc.policy]
			if !ok {
				t.Fatalf("policy %s is in no row of docs/security.md: give it the row's ID in gpuPolicyGuarantees", tc.policy)
			}
			t.Run(id+" "+tc.policy+" "+tc.name+" "+v.String(), func(t *testing.T) {
				got := c.evaluate(t, tc.req)
				switch {
				case tc.want == "" && got != "":
					t.Errorf("%s %s: %s: refused: %s", v, tc.policy, tc.name, got)
				case tc.want == "error" && (got == "" || isReasonCode(strings.SplitN(got, ":", 2)[0])):
					t.Errorf("%s %s: %s: want a refusal by failurePolicy, got %q", v, tc.policy, tc.name, got)
				case tc.want != "" && tc.want != "error" && !strings.HasPrefix(got, tc.want+": "):
					t.Errorf("%s %s: %s: want a refusal starting %s, got %q", v, tc.policy, tc.name, tc.want, got)
				}
			})
		}
	}
	for name := range policies {
		if strings.HasPrefix(name, "xila-guard-gpu-") && !seen[name] {
			t.Errorf("policy %s has no cases", name)
		}
	}
}

func isReasonCode(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// TestAdmissionPoliciesTypeCheck compiles every expression of every
// admission policy the chart renders, typed against the real schemas of
// the kinds they match (KubeVirt's, core Pod and ConfigMap, the guard
// CRDs) and of their parameters (PolicyParameterSet, TenantBinding,
// GPUDevice, GPUClass, ConfigMap), in the environment of each supported
// Kubernetes minor for new expressions, as the API server's type checker
// does. A policy on kinds without a schema here (nodes, namespaces,
// services) is checked untyped, its parameter still typed.
func TestAdmissionPoliciesTypeCheck(t *testing.T) {
	all := policySchemas(t)
	vals := withTestCA(t, readValues(t, "enforcement-integrations"))
	vals["gpuDevicePolicies"] = readValues(t, "gpu-devices")["gpuDevicePolicies"]
	policies := renderedPolicies(t, vals)
	n := 0
	for name, p := range policies {
		n++
		var params *spec.Schema
		if pk := p.Spec.ParamKind; pk != nil {
			gv, err := schema.ParseGroupVersion(pk.APIVersion)
			if err != nil {
				t.Fatal(err)
			}
			s := schemaOf(all, gv.WithKind(pk.Kind))
			if s == nil {
				t.Fatalf("%s: no schema for its parameter %s", name, pk.Kind)
			}
			params = s
		}
		kinds := matched(p.ValidatingAdmissionPolicy, all)
		wildcard := false
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			for _, res := range r.Resources {
				wildcard = wildcard || strings.Contains(res, "*")
			}
		}
		if len(kinds) == 0 || wildcard {
			kinds = append(kinds, kindSchema{}) // untyped, as the API server checks it
		}
		for _, v := range celVersions {
			for _, k := range kinds {
				problems := typeCheck(t, v, p.ValidatingAdmissionPolicy, k.schema, params)
				for _, pr := range problems {
					t.Errorf("%s on %s, Kubernetes %s: %s", name, k.gvk.Kind, v, pr)
				}
			}
		}
	}
	if n != 18 {
		t.Errorf("rendered %d admission policies, want the 9 trust policies and the 9 GPU device policies", n)
	}
}

// BenchmarkGPUDevicePolicyCost reports, for each GPU device policy, the
// highest CEL cost of its cases above (cost units) and that cost as a
// share of the API server's budget for one policy evaluation
// (RuntimeCELCostBudget): docs/benchmarks/gpudevices.md.
func BenchmarkGPUDevicePolicyCost(b *testing.B) {
	t := &testing.T{}
	policies := renderedPolicies(t, readValues(t, "gpu-devices"))
	v := libraryVersion
	names := []string{}
	for _, tc := range gpuPolicyCases {
		if len(names) == 0 || names[len(names)-1] != tc.policy {
			names = append(names, tc.policy)
		}
	}
	for _, name := range names {
		b.Run(strings.TrimPrefix(name, "xila-guard-gpu-"), func(b *testing.B) {
			c := compilePolicy(t, v, policies[name])
			var most int64
			for b.Loop() {
				for _, tc := range gpuPolicyCases {
					if tc.policy != name {
						continue
					}
					tc.req.namespace = gpuTenantNS
					if cost := c.cost(b, tc.req); cost > most {
						most = cost
					}
				}
			}
			b.ReportMetric(float64(most), "cost/max")
			b.ReportMetric(100*float64(most)/float64(celconfig.RuntimeCELCostBudget), "%budget")
		})
	}
}

// TestWebhookReadsGPUSettings: with device enforcement and GPUs for VMs
// both on, the webhook is told where the GPU controller's settings are and
// may read that one GPUSettings; with either off it is told nothing.
func TestWebhookReadsGPUSettings(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name          string
		devices, gpus bool
	}{{"both", true, true}, {"devices only", true, false}, {"GPUs for VMs only", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			vals := withTestCA(t, readValues(t, "enforcement-integrations"))
			vals["webhook"].(map[string]any)["devices"] = tc.devices
			vals["gpuDevicePolicies"] = map[string]any{"enabled": tc.gpus}
			objs := objects(t, mustRender(t, ch, vals).Manifest)
			ns, ok := flagValue(webhookArgs(t, objs), "gpu-settings-namespace")
			var role *object
			for i := range objs {
				if objs[i].Kind == "Role" && objs[i].name() == "xila-guard-webhook-gpu-settings" {
					role = &objs[i]
				}
			}
			if want := tc.devices && tc.gpus; ok != want || (role != nil) != want {
				t.Fatalf("--gpu-settings-namespace %q (%t) and its Role %v, want both %t", ns, ok, role, want)
			}
			if !ok {
				return
			}
			if ns != releaseNS {
				t.Errorf("--gpu-settings-namespace=%s, want the release namespace %s", ns, releaseNS)
			}
			rules := toYAML(t, field(role.raw, "rules"))
			if want := toYAML(t, []any{map[string]any{"apiGroups": []any{"gpu.guard.xila.us"}, "resources": []any{"gpusettings"},
				"resourceNames": []any{"xila-guard-gpu-settings"}, "verbs": []any{"get", "list", "watch"}}}); rules != want {
				t.Errorf("Role rules:\n%s\nwant:\n%s", rules, want)
			}
			b := find(t, objs, "RoleBinding", "xila-guard-webhook-gpu-settings")
			if sa := field(b.raw, "subjects", 0, "name"); sa != "xila-guard-webhook" {
				t.Errorf("RoleBinding subject %v, want the webhook's service account", sa)
			}
		})
	}
}
