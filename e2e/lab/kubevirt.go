package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// KubeVirt in the lab: its CRDs only, generated from the pinned
// kubevirt.io/client-go; no KubeVirt controller runs. Tests act as its
// controller's service account where KubeVirt would write.
const (
	KubeVirtNamespace  = "kubevirt"
	KubeVirtController = "system:serviceaccount:" + KubeVirtNamespace + ":kubevirt-controller"
	// DeviceLabel names the GPUDevice a VMI takes its GPU through.
	DeviceLabel = "gpu.guard.xila.us/device"
)

// GVRVMI is the resource of VirtualMachineInstances.
var GVRVMI = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// ApplyKubeVirtCRDs applies KubeVirt's CRDs and waits until they and the
// GPU CRDs are served: the GPU controller refuses to start without the
// VMI CRD.
func (c *Cluster) ApplyKubeVirtCRDs(ctx context.Context) error {
	if err := c.run(ctx, "kubectl", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(c.RepoRoot, "components/gpudevices/config/kubevirt-crds")); err != nil {
		return err
	}
	return c.run(ctx, "kubectl", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/virtualmachineinstances.kubevirt.io", "crd/gpudevices.gpu.guard.xila.us", "crd/gpuclasses.gpu.guard.xila.us", "crd/gpusettings.gpu.guard.xila.us")
}

// GPUsForVMs are the chart values that turn GPUs for VMs on: the GPU
// controller (one replica) and its admission policies.
func GPUsForVMs() map[string]any {
	return map[string]any{"gpuDevicePolicies": map[string]any{"enabled": true, "controller": map[string]any{"replicas": 1}}}
}

// GrantKubeVirt grants, in namespace ns, what KubeVirt's own roles would:
// user makes VMIs, and KubeVirt's controller makes their pods.
func (c *Cluster) GrantKubeVirt(ctx context.Context, ns, user string) error {
	const name = "xg-e2e-kubevirt"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user},
			{Kind: rbacv1.ServiceAccountKind, Name: "kubevirt-controller", Namespace: KubeVirtNamespace}}}
	_ = c.Kube.RbacV1().RoleBindings(ns).Delete(ctx, name, metav1.DeleteOptions{})
	_ = c.Kube.RbacV1().Roles(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	return err
}

// VMIWithClaimGPU is a VMI that takes one GPU through the DRA claim of a
// template (its gpus entry names the claim's request "gpu"), and names
// device as the GPUDevice it holds.
func VMIWithClaimGPU(ns, name, device, template string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{DeviceLabel: device}},
		"spec": map[string]any{
			"domain": map[string]any{
				"devices":   map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}}},
				"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
			},
			"resourceClaims": []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": template}},
		},
	}}
}

// ControlledByVMI makes the VMI the pod's controller, as KubeVirt makes its
// virt-launcher pods.
func ControlledByVMI(name string, uid types.UID) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
			Name: name, UID: uid, Controller: &yes, BlockOwnerDeletion: &yes})
	}
}

// WaitClaimHolder waits until the GPU controller's settings list the VMI
// of uid in namespace ns as holding a device of deviceClass, which the
// webhook reads to hand that DeviceClass's claims to the VMI's launcher.
func (c *Cluster) WaitClaimHolder(ctx context.Context, ns string, uid types.UID, deviceClass string) error {
	entry := gpuv1alpha1.ClaimHolder(ns, string(uid), deviceClass)
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.GPUSettings(ctx)
		if err != nil {
			return false, nil
		}
		last = s.ClaimHolders
		return slices.Contains(last, entry), nil
	})
	if err != nil {
		return fmt.Errorf("the GPU settings' claimHolders %v never listed %s: %w", last, entry, err)
	}
	return nil
}

// GPUSettings reads the GPU controller's settings.
func (c *Cluster) GPUSettings(ctx context.Context) (*gpuv1alpha1.GPUSettingsSpec, error) {
	u, err := c.Dyn.Resource(gpuv1alpha1.GroupVersion.WithResource("gpusettings")).Namespace(PlatformNamespace).Get(ctx, gpuv1alpha1.SettingsName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s := &gpuv1alpha1.GPUSettings{}
	if err := fixture.FromUnstructured(u, s); err != nil {
		return nil, err
	}
	return &s.Spec, nil
}
