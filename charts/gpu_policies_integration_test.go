//go:build integration

package charts

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Principals of the GPU device policies, as the API server authenticates
// them.
var (
	tenantAlice  = principal{gpuTenant, tenantGroup}
	kubevirtCtrl = principal{kubevirtController, []string{"system:serviceaccounts", "system:serviceaccounts:kubevirt", "system:authenticated"}}
	virtHandler  = principal{"system:serviceaccount:kubevirt:virt-handler", []string{"system:serviceaccounts", "system:serviceaccounts:kubevirt", "system:authenticated"}}
	gpuCtrl      = principal{"system:serviceaccount:" + releaseNS + ":xila-guard-gpudevices", platformSA}
	tenantSA     = principal{"system:serviceaccount:acme:default", []string{"system:serviceaccounts", "system:serviceaccounts:acme", "system:authenticated"}}
)

func (p principal) dynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	d, err := dynamic.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// installKubeVirtCRDs installs the KubeVirt CRDs generated from the pinned
// KubeVirt API module; no KubeVirt controller runs.
func installKubeVirtCRDs(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	files, err := filepath.Glob("../components/gpudevices/config/kubevirt-crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no KubeVirt CRDs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing %s: %v", f, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s is not established: %v", crd.Name, err)
		}
	}
}

// grantGPUWrites lets the tests' principals write what they write, as
// KubeVirt's and the chart's roles would: only the policies refuse.
func grantGPUWrites(t *testing.T) {
	t.Helper()
	grantGroups(t, "gpu-test-writer", true, []rbacv1.PolicyRule{{
		APIGroups: []string{"", "kubevirt.io", "pool.kubevirt.io", "instancetype.kubevirt.io", "gpu.guard.xila.us"},
		Resources: []string{"pods", "configmaps", "virtualmachineinstances", "virtualmachines", "virtualmachineinstancereplicasets", "virtualmachinepools", "virtualmachineinstancetypes", "gpudevices", "gpuclasses"},
		Verbs:     []string{"get", "list", "create", "update", "patch", "delete"},
	}}, "system:authenticated")
}

// applyGPUPolicies creates the chart's GPU device policies and bindings
// (and removes them when the test ends, so they bind no other test).
func applyGPUPolicies(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, o := range objects(t, mustRender(t, loadChart(t), readValues(t, "gpu-devices")).Manifest) {
		if o.Kind == "PolicyParameterSet" {
			recreate(t, &unstructured.Unstructured{Object: o.raw})
			continue
		}
		if (o.Kind != "ValidatingAdmissionPolicy" && o.Kind != "ValidatingAdmissionPolicyBinding") || !strings.HasPrefix(o.name(), "xila-guard-gpu-") {
			continue
		}
		u := &unstructured.Unstructured{Object: o.raw}
		recreate(t, u)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
		if o.Kind == "ValidatingAdmissionPolicy" {
			names = append(names, o.name())
		}
	}
	return names
}

// gpuAttempt is one write from one principal's seat.
type gpuAttempt struct {
	name string
	who  principal
	gvr  schema.GroupVersionResource
	ns   string
	// before, when set, is created by the administrator first (an update
	// then applies obj over it).
	before map[string]any
	obj    map[string]any
	want   string
}

func (a gpuAttempt) run(ctx context.Context, t *testing.T) error {
	t.Helper()
	res := func(d dynamic.Interface) dynamic.ResourceInterface {
		if a.ns == "" {
			return d.Resource(a.gvr)
		}
		return d.Resource(a.gvr).Namespace(a.ns)
	}
	u := &unstructured.Unstructured{Object: runtimeCopy(a.obj)}
	if a.before != nil {
		b := &unstructured.Unstructured{Object: runtimeCopy(a.before)}
		adminRes := res(admin.dynamic(t))
		purge(ctx, adminRes, b.GetName())
		stored, err := createFresh(ctx, adminRes, b)
		if err != nil {
			t.Fatalf("%s: creating the object before: %v", a.name, err)
		}
		u.SetResourceVersion(stored.GetResourceVersion())
		_, err = res(a.who.dynamic(t)).Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	_, err := res(a.who.dynamic(t)).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// purge deletes an object as the administrator, its finalizers first, so
// that nothing keeps it.
func purge(ctx context.Context, r dynamic.ResourceInterface, name string) {
	_, _ = r.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	_ = r.Delete(ctx, name, metav1.DeleteOptions{})
}

// createFresh creates u, waiting while an object of its name is still
// being deleted.
func createFresh(ctx context.Context, r dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var out *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		out, err = r.Create(ctx, u.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	})
	return out, err
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestIntegrationGPUDevicePolicies applies the chart's GPU device
// policies to a real API server with KubeVirt's CRDs and tries every rule
// from the seats of a tenant, KubeVirt's controller, the GPU controller
// and the administrators: each allowed and refused.
// awaitPolicies waits until every policy the attempts exercise has taken
// effect: the API server's policy informer adds each policy and binding on
// its own, so the first refusal of each kind of object and reason code is
// awaited before any attempt is judged.
func awaitPolicies(ctx context.Context, t *testing.T, attempts []gpuAttempt) {
	t.Helper()
	type kind struct {
		gvr  schema.GroupVersionResource
		want string
	}
	seen := map[kind]bool{}
	for _, a := range attempts {
		k := kind{a.gvr, a.want}
		if a.want == "" || seen[k] {
			continue
		}
		seen[k] = true
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = a.run(ctx, t)
			return last != nil && strings.Contains(last.Error(), a.want+": "), nil
		})
		if err != nil {
			t.Fatalf("the policy refusing %q with %s does not take effect: %v (last: %v)", a.name, a.want, err, last)
		}
	}
}

func TestIntegrationGPUDevicePolicies(t *testing.T) {
	ctx := t.Context()
	installKubeVirtCRDs(t)
	grantGPUWrites(t)
	ensureNamespace(t, gpuTenantNS, map[string]string{"guard.xila.us/tenant": "acme"})
	ensureNamespace(t, releaseNS, nil)
	ensureNamespace(t, "team-web", nil)
	cm := &unstructured.Unstructured{Object: runtimeCopy(settings)}
	recreate(t, cm)
	// Two devices of the class in the tenant's namespace, as the GPU
	// controller judged them: one free, one another VMI holds.
	for _, d := range []struct{ name, holder string }{{"h100-free", ""}, {"h100-held", "vm-other"}} {
		u := &unstructured.Unstructured{Object: device(d.name, nil)}
		u.SetNamespace(gpuTenantNS)
		recreate(t, u)
		status := map[string]any{"phase": "Available", "resourceName": gpuResource}
		if d.holder != "" {
			status["phase"] = "Held"
			status["heldBy"] = map[string]any{"name": d.holder, "uid": "uid-" + d.holder, "since": "2026-12-01T00:00:00Z"}
		}
		patch, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("writing the status of device %s: %v", d.name, err)
		}
	}
	names := applyGPUPolicies(t)
	if len(names) != 9 {
		t.Fatalf("the chart rendered the GPU policies %v, want 9", names)
	}

	protectedClass := class("h100", classSpecOld, []any{classFinalizer}, false)
	attempts := []gpuAttempt{
		// 1. GPUs in VMs only with the device label.
		{name: "G-GPU-VM-DEVICES tenant VMI naming the GPU directly", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withGPU), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI through its device", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(labelled, withGPU)},
		{name: "G-GPU-VM-DEVICES tenant VMI with a host device", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withHost), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI with a DRA claim", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withDRA), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI with a GPU resource", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withRes), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI naming a device another VMI holds", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS,
			obj: vmi(map[string]any{deviceLabel: "h100-held"}, withGPU), want: "GPU_DEVICE_HELD"},
		{name: "G-GPU-VM-DEVICES KubeVirt's controller writes a VMI naming a device another VMI holds", who: kubevirtCtrl, gvr: gvrVMI, ns: gpuTenantNS,
			obj: vmi(map[string]any{deviceLabel: "h100-held"}, withGPU), want: "GPU_DEVICE_HELD"},
		{name: "G-GPU-VM-DEVICES tenant VMI naming a free device of its class", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(map[string]any{deviceLabel: "h100-free"}, withGPU)},
		{name: "G-GPU-VM-DEVICES tenant VMI taking its GPU through a DRA claim, naming a free device", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(map[string]any{deviceLabel: "h100-free"}, withClaimGPU)},
		{name: "G-GPU-VM-DEVICES tenant VMI taking its GPU through a DRA claim, without a device", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withClaimGPU), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI asking a device for another GPU than its class offers", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS,
			obj: vmi(map[string]any{deviceLabel: "h100-free"}, vmiSpec(nil, map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}, nil)), want: "GPU_DEVICE_CLASS_MISMATCH"},
		{name: "G-GPU-VM-DEVICES tenant VMI limiting nvidia.com/gpu, which no class sells", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS,
			obj: vmi(nil, vmiSpec(nil, map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}, nil)), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VMI requesting another vendor's GPU", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS,
			obj: vmi(nil, vmiSpec(nil, map[string]any{"requests": map[string]any{"amd.com/gpu": "1"}}, nil)), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES KubeVirt's controller writes the VMI of an unlabelled VM", who: kubevirtCtrl, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withGPU), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES a cluster admin's VMI", who: admin, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withGPU), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES a VMI without GPUs", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(nil, withCPU)},
		{name: "G-GPU-VM-DEVICES a VMI outside the tenant namespaces", who: admin, gvr: gvrVMI, ns: "team-web", obj: with(vmi(nil, withGPU), "metadata", map[string]any{"name": "vm1", "namespace": "team-web"})},
		{name: "G-GPU-VM-DEVICES tenant VM with an unlabelled template", who: tenantAlice, gvr: gvrVM, ns: gpuTenantNS, obj: kobj("kubevirt.io/v1", "VirtualMachine", meta("vm", labelled), map[string]any{"template": template(nil, withGPU)}), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant VM with a labelled template", who: tenantAlice, gvr: gvrVM, ns: gpuTenantNS, obj: kobj("kubevirt.io/v1", "VirtualMachine", meta("vm", nil), map[string]any{"template": template(labelled, withGPU)})},
		{name: "G-GPU-VM-DEVICES tenant replica set", who: tenantAlice, gvr: gvrVMIRS, ns: gpuTenantNS, obj: kobj("kubevirt.io/v1", "VirtualMachineInstanceReplicaSet", meta("rs", nil), map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}, "template": template(map[string]any{"app": "x"}, withHost)}), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant pool", who: tenantAlice, gvr: gvrPool, ns: gpuTenantNS, obj: kobj("pool.kubevirt.io/v1beta1", "VirtualMachinePool", meta("pool", nil), map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}, "virtualMachineTemplate": map[string]any{"spec": map[string]any{"template": template(nil, withRes)}}}), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant instance type", who: tenantAlice, gvr: gvrIT, ns: gpuTenantNS, obj: kobj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", meta("big", nil), map[string]any{"cpu": map[string]any{"guest": int64(4)}, "memory": map[string]any{"guest": "8Gi"}, "gpus": []any{map[string]any{"name": "g", "deviceName": gpuResource}}}), want: "GPU_DEVICE_REQUIRED"},
		{name: "G-GPU-VM-DEVICES tenant instance type with the label", who: tenantAlice, gvr: gvrIT, ns: gpuTenantNS, obj: kobj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", meta("big", labelled), map[string]any{"cpu": map[string]any{"guest": int64(4)}, "memory": map[string]any{"guest": "8Gi"}, "gpus": []any{map[string]any{"name": "g", "deviceName": gpuResource}}})},

		// 2. GPU pods only from KubeVirt's controller, for a VMI.
		{name: "G-GPU-PODS KubeVirt's controller creates a launcher pod", who: kubevirtCtrl, gvr: gvrPod, ns: gpuTenantNS, obj: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil)},
		{name: "G-GPU-PODS KubeVirt's controller creates the launcher pod of a VMI that holds no device", who: kubevirtCtrl, gvr: gvrPod, ns: gpuTenantNS,
			obj: pod("virt-launcher-ghost-abcde", with(vmiOwner, "uid", "u-ghost"), []any{container(gpuLimits)}, nil), want: "GPU_DEVICE_NOT_HELD"},
		{name: "G-GPU-PODS a tenant's copy of the launcher pod", who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS, obj: pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(gpuLimits)}, nil), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS a tenant service account's GPU pod", who: tenantSA, gvr: gvrPod, ns: gpuTenantNS, obj: pod("p", nil, []any{container(map[string]any{"requests": map[string]any{"nvidia.com/A10": "1"}, "limits": map[string]any{"nvidia.com/A10": "1"}})}, nil), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS virt-handler's pod", who: virtHandler, gvr: gvrPod, ns: gpuTenantNS, obj: pod("p", vmiOwner, []any{container(gpuLimits)}, nil), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS KubeVirt's controller without a VMI owner", who: kubevirtCtrl, gvr: gvrPod, ns: gpuTenantNS, obj: pod("p", nil, []any{container(gpuLimits)}, nil), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS a tenant pod without GPUs", who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS, obj: pod("p", nil, []any{container(plainLimits)}, nil)},
		{name: "G-GPU-PODS a tenant's pod that consumes claims under a VMI's control", who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS,
			obj: consuming(pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(nil)}, nil)), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS KubeVirt's controller creates a launcher pod that consumes claims", who: kubevirtCtrl, gvr: gvrPod, ns: gpuTenantNS,
			obj: consuming(pod("virt-launcher-vm1-abcde", vmiOwner, []any{container(nil)}, nil))},
		{name: "G-GPU-PODS a tenant puts its pod that consumes claims under a VMI's control", who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS,
			before: consuming(pod("claims-pod", nil, []any{container(nil)}, nil)), obj: consuming(pod("claims-pod", vmiOwner, []any{container(nil)}, nil)), want: "GPU_RESOURCE_FORBIDDEN"},
		{name: "G-GPU-PODS a tenant relabels its pod that consumes claims", who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS,
			before: consuming(pod("claims-pod", nil, []any{container(nil)}, nil)), obj: consuming(with(pod("claims-pod", nil, []any{container(nil)}, nil), "metadata", meta("claims-pod", map[string]any{"team": "ml"})))},

		// 3. The reserved usage-label key.
		{name: "G-GPU-USAGE-LABEL tenant labels a ConfigMap as a usage record", who: tenantAlice, gvr: gvrCM, ns: gpuTenantNS, obj: configMap(map[string]any{usageLabel: "acme.h100-a"}), want: "USAGE_LABEL_RESERVED"},
		{name: "G-GPU-USAGE-LABEL an admin does the same in a tenant namespace", who: admin, gvr: gvrCM, ns: gpuTenantNS, obj: configMap(map[string]any{usageLabel: "acme.h100-a"}), want: "USAGE_LABEL_RESERVED"},
		{name: "G-GPU-USAGE-LABEL the key on a VMI", who: tenantAlice, gvr: gvrVMI, ns: gpuTenantNS, obj: vmi(map[string]any{usageLabel: "x", deviceLabel: "h100-a"}, withGPU), want: "USAGE_LABEL_RESERVED"},
		{name: "G-GPU-USAGE-LABEL a usage record forged in a namespace of no tenant", who: admin, gvr: gvrCM, ns: "team-web",
			obj: with(configMap(map[string]any{usageLabel: "acme.h100-a"}), "metadata", map[string]any{"name": "forged-usage", "namespace": "team-web", "labels": map[string]any{usageLabel: "acme.h100-a"}}), want: "USAGE_LABEL_RESERVED"},
		{name: "G-GPU-USAGE-LABEL the GPU controller's record in the platform namespace", who: admin, gvr: gvrCM, ns: releaseNS, obj: with(configMap(map[string]any{usageLabel: "acme.h100-a"}), "metadata", map[string]any{"name": "gpu-usage-acme-h100-a", "namespace": releaseNS, "labels": map[string]any{usageLabel: "acme.h100-a"}})},
		{name: "G-GPU-USAGE-LABEL a record kept as it is", who: tenantAlice, gvr: gvrCM, ns: gpuTenantNS, before: configMap(nil), obj: configMap(map[string]any{"x": "y"})},

		// 4. A device's finalizer and template label are the platform's.
		{name: "G-GPU-DEVICE-FIELDS a tenant orders a device", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, obj: device("h100-a", nil)},
		{name: "G-GPU-DEVICE-FIELDS a tenant orders one with the finalizer", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, obj: device("h100-a", nil, deviceFinalizer), want: "DEVICE_FIELD_PLATFORM_ONLY"},
		{name: "G-GPU-DEVICE-FIELDS a tenant marks one as a template device", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, obj: device("h100-a", map[string]any{templateLabel: "vm1"}), want: "DEVICE_FIELD_PLATFORM_ONLY"},
		{name: "G-GPU-DEVICE-FIELDS a tenant removes the finalizer", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, before: device("h100-a", nil, deviceFinalizer), obj: device("h100-a", nil), want: "DEVICE_FIELD_PLATFORM_ONLY"},
		{name: "G-GPU-DEVICE-FIELDS a tenant removes the template label", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, before: device("h100-a", map[string]any{templateLabel: "vm1"}), obj: device("h100-a", nil), want: "DEVICE_FIELD_PLATFORM_ONLY"},
		{name: "G-GPU-DEVICE-FIELDS the GPU controller removes the finalizer", who: gpuCtrl, gvr: gvrDevice, ns: gpuTenantNS, before: device("h100-a", nil, deviceFinalizer), obj: device("h100-a", nil)},
		{name: "G-GPU-DEVICE-FIELDS a tenant relabels a device otherwise", who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, before: device("h100-a", nil, deviceFinalizer), obj: device("h100-a", map[string]any{"team": "ml"}, deviceFinalizer)},

		// 5. What a protected class sells is immutable.
		{name: "G-GPU-CLASS-OFFER an admin changes a protected class's model", who: admin, gvr: gvrClass, before: protectedClass, obj: class("h100", with(classSpecOld, "model", "H200"), []any{classFinalizer}, false), want: "GPU_CLASS_OFFER_IMMUTABLE"},
		{name: "G-GPU-CLASS-OFFER the write that drops the finalizer changes the mode", who: admin, gvr: gvrClass, before: protectedClass, obj: class("h100", with(with(classSpecOld, "mode", "VGPU"), "profile", "H100-40C"), nil, false), want: "GPU_CLASS_OFFER_IMMUTABLE"},
		{name: "G-GPU-CLASS-OFFER an admin moves a protected class", who: admin, gvr: gvrClass, before: protectedClass, obj: class("h100", with(classSpecOld, "nodeSelector", map[string]any{"rack": "b"}), []any{classFinalizer}, false)},
	}
	awaitPolicies(ctx, t, attempts)
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			err := a.run(ctx, t)
			switch {
			case a.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case a.want != "" && (err == nil || !strings.Contains(err.Error(), a.want+": ")):
				t.Errorf("want a refusal with %s, got %v", a.want, err)
			}
		})
	}

	// 6. A class being deleted takes no new orders, and holds for the
	// devices it has.
	t.Run("G-GPU-CLASS-OFFER a class being deleted", func(t *testing.T) {
		live := &unstructured.Unstructured{Object: runtimeCopy(protectedClass)}
		purge(ctx, admin.dynamic(t).Resource(gvrClass), "h100")
		if _, err := createFresh(ctx, admin.dynamic(t).Resource(gvrClass), live); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { purge(context.Background(), admin.dynamic(t).Resource(gvrClass), "h100") })
		c := &unstructured.Unstructured{Object: runtimeCopy(class("a10", with(classSpecOld, "resourceName", "nvidia.com/A10"), []any{classFinalizer}, false))}
		classes := admin.dynamic(t).Resource(gvrClass)
		purge(ctx, classes, "a10")
		if _, err := createFresh(ctx, classes, c); err != nil {
			t.Fatal(err)
		}
		order := gpuAttempt{who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, obj: with(device("a10-a", nil), "spec", map[string]any{"className": "a10", "count": int64(1)})}
		if err := order.run(ctx, t); err != nil {
			t.Fatalf("an order of a live class is refused: %v", err)
		}
		if err := classes.Delete(ctx, "a10", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { purge(context.Background(), classes, "a10") })
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			err := order.run(ctx, t)
			return err != nil && strings.Contains(err.Error(), "GPU_CLASS_DELETING: "), nil
		})
		if err != nil {
			t.Errorf("an order of a class being deleted is not refused: %v", order.run(ctx, t))
		}
		other := gpuAttempt{who: tenantAlice, gvr: gvrDevice, ns: gpuTenantNS, obj: device("h100-b", nil)} // class h100 is live
		if err := other.run(ctx, t); err != nil {
			t.Errorf("an order of another class is refused: %v", err)
		}
	})

	// Without the settings the pod and VM policies refuse
	// everything they bind, in tenant namespaces only.
	t.Run("G-GPU-PODS settings missing", func(t *testing.T) {
		if err := env.Client.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.Create(context.Background(), &unstructured.Unstructured{Object: runtimeCopy(settings)})
		})
		plainPod := gpuAttempt{who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS, obj: pod("p", nil, []any{container(nil)}, nil)}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			err := plainPod.run(ctx, t)
			return err != nil && strings.Contains(err.Error(), "xila-guard-gpu-pods"), nil
		})
		if err != nil {
			t.Errorf("a tenant pod is admitted without the settings: %v", plainPod.run(ctx, t))
		}
		elsewhere := gpuAttempt{who: admin, gvr: gvrPod, ns: "team-web", obj: with(pod("p", nil, []any{container(gpuLimits)}, nil), "metadata", map[string]any{"name": "p", "namespace": "team-web"})}
		if err := elsewhere.run(ctx, t); err != nil {
			t.Errorf("a pod outside the tenant namespaces is refused: %v", err)
		}
	})

	// An uninstall removes every binding of the GPU policies; the API
	// server then stops the parameter informer of their kind. Settings that
	// change meanwhile must be what the policies judge by once they are
	// bound again: a resource sold since is refused to tenants at once.
	t.Run("G-GPU-PODS settings changed while no policy was bound are read afresh", func(t *testing.T) {
		var bindings []*unstructured.Unstructured
		for _, o := range objects(t, mustRender(t, loadChart(t), readValues(t, "gpu-devices")).Manifest) {
			if o.Kind == "ValidatingAdmissionPolicyBinding" && strings.HasPrefix(o.name(), "xila-guard-gpu-") {
				bindings = append(bindings, &unstructured.Unstructured{Object: o.raw})
			}
		}
		for _, b := range bindings {
			if err := env.Client.Delete(ctx, b.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
		// Longer than the API server's policy refresh (one second).
		time.Sleep(3 * time.Second)
		const sold = "nvidia.com/SOLD_SINCE"
		fresh := &unstructured.Unstructured{Object: runtimeCopy(settingsCM("nvidia.com/A10," + gpuResource + "," + sold))}
		recreate(t, fresh)
		for _, b := range bindings {
			recreate(t, b)
		}
		attempt := gpuAttempt{who: tenantAlice, gvr: gvrPod, ns: gpuTenantNS,
			obj: pod("p", nil, []any{container(map[string]any{"limits": map[string]any{sold: "1"}})}, nil)}
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = attempt.run(ctx, t)
			return last != nil && strings.Contains(last.Error(), "GPU_RESOURCE_FORBIDDEN: "), nil
		})
		if err != nil {
			t.Errorf("a tenant pod requesting %s, sold since the policies were last bound: %v, want GPU_RESOURCE_FORBIDDEN", sold, last)
		}
	})

}
