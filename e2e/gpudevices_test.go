//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

const (
	// labGPU is the resource the lab device plugin advertises, two per
	// worker, and the resourceName of the test's GPUClass.
	labGPU       = "xila-guard.lab/gpu"
	gpuClassName = "lab-gpu"
	gpuDevice    = "gpu-a"
	gpuLabel     = lab.DeviceLabel
	kubevirtNS   = lab.KubeVirtNamespace
	kubevirtSA   = "kubevirt-controller"
	gpuTenantBob = "bob"
)

var (
	gvrGPUClass  = schema.GroupVersionResource{Group: "gpu.guard.xila.us", Version: "v1alpha1", Resource: "gpuclasses"}
	gvrGPUDevice = schema.GroupVersionResource{Group: "gpu.guard.xila.us", Version: "v1alpha1", Resource: "gpudevices"}
	gvrVMI       = lab.GVRVMI
)

type gpuTenantKey struct{}

// TestGPUDevices installs the GPU controller and the GPU device policies
// with the chart, KubeVirt's CRDs (no KubeVirt controller runs) and the
// lab device plugin on every worker, then walks the tenant's path: the
// tenant orders a device of the platform's class; a VMI that names it is
// admitted and holds it; a VMI that names the GPU directly is refused; a
// launcher-shaped pod that KubeVirt's controller account creates for the
// VMI gets a GPU from the device plugin and runs once the VMI is recorded
// as its device's holder, and the tenant's copy of it is refused; a VMI
// naming a device that does not exist is admitted but its launcher pod
// is refused.
func TestGPUDevices(t *testing.T) {
	f := features.New("GPUs for KubeVirt VMs only through a held device").
		Setup(installGPUDevices).
		Assess("the settings list the class's resource", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labCluster(t, cfg)
			pollFor(ctx, t, time.Minute, "the settings to list "+labGPU, func(ctx context.Context) bool {
				s, err := l.GPUSettings(ctx)
				return err == nil && slices.Equal(s.ResourceNames, []string{labGPU})
			})
			return ctx
		}).
		Assess("the tenant orders a device, and its VMI holds it", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := ctx.Value(gpuTenantKey{}).(string)
			tenant := impersonated(t, cfg, gpuTenantBob, nil)
			device, err := fixture.ToUnstructured(fixture.MakeGPUDevice(gpuDevice, ns, gpuClassName).Obj())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tenant.Resource(gvrGPUDevice).Namespace(ns).Create(ctx, device, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the tenant orders a device: %v", err)
			}
			waitDevicePhase(ctx, t, cfg, ns, "Available")
			if _, err := tenant.Resource(gvrVMI).Namespace(ns).Create(ctx, labVMI(ns, "vm1", gpuDevice), metav1.CreateOptions{}); err != nil {
				t.Fatalf("a VMI that names its device is refused: %v", err)
			}
			d := waitDevicePhase(ctx, t, cfg, ns, "Held")
			if name, _, _ := unstructured.NestedString(d.Object, "status", "heldBy", "name"); name != "vm1" {
				t.Errorf("device held by %q, want vm1", name)
			}
			return ctx
		}).
		Assess("G-GPU-VM-DEVICES a second VMI naming the held device is refused at admission", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := ctx.Value(gpuTenantKey{}).(string)
			tenant := impersonated(t, cfg, gpuTenantBob, nil)
			var err error
			// The API server's parameter informer learns the holder within moments.
			_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = tenant.Resource(gvrVMI).Namespace(ns).Create(ctx, labVMI(ns, "vm2", gpuDevice), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err != nil, nil
			})
			if err == nil || !strings.Contains(err.Error(), "GPU_DEVICE_HELD: ") {
				t.Errorf("a second VMI naming device %s, which vm1 holds: %v, want GPU_DEVICE_HELD", gpuDevice, err)
			}
			return ctx
		}).
		Assess("G-GPU-VM-DEVICES a VMI that names the GPU directly is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := ctx.Value(gpuTenantKey{}).(string)
			_, err := impersonated(t, cfg, gpuTenantBob, nil).Resource(gvrVMI).Namespace(ns).Create(ctx, labVMI(ns, "vm-direct", ""), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "GPU_DEVICE_REQUIRED: ") {
				t.Errorf("a VMI naming %s without a device: %v, want GPU_DEVICE_REQUIRED", labGPU, err)
			}
			return ctx
		}).
		Assess("G-GPU-PODS KubeVirt's controller's launcher pod gets a GPU; the tenant's copy is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := ctx.Value(gpuTenantKey{}).(string)
			cs := clientset(t, cfg)
			vmi, err := dynamicClientFor(t, cfg).Resource(gvrVMI).Namespace(ns).Get(ctx, "vm1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			launcher := launcherPod(ns, vmi)
			kubevirt, err := kubernetes.NewForConfig(impersonatedConfig(cfg, "system:serviceaccount:"+kubevirtNS+":"+kubevirtSA,
				[]string{"system:serviceaccounts", "system:serviceaccounts:" + kubevirtNS, "system:authenticated"}))
			if err != nil {
				t.Fatal(err)
			}
			// KubeVirt retries a launcher pod the API server refuses; the
			// settings record vm1 as its device's holder within moments.
			err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = kubevirt.CoreV1().Pods(ns).Create(ctx, launcher, metav1.CreateOptions{})
				return err == nil || !strings.Contains(err.Error(), "GPU_DEVICE_NOT_HELD: "), nil
			})
			if err != nil {
				t.Fatalf("KubeVirt's controller creates the launcher pod: %v", err)
			}
			p := waitRunning(ctx, t, cs, ns, launcher.Name)
			if got := p.Spec.Containers[0].Resources.Limits[labGPU]; got.Value() != 1 {
				t.Errorf("launcher pod limits %s=%s, want 1", labGPU, got.String())
			}
			copyPod := launcherPod(ns, vmi)
			copyPod.Name = "virt-launcher-copy"
			tenant, err := kubernetes.NewForConfig(impersonatedConfig(cfg, gpuTenantBob, nil))
			if err != nil {
				t.Fatal(err)
			}
			_, err = tenant.CoreV1().Pods(ns).Create(ctx, copyPod, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "GPU_RESOURCE_FORBIDDEN: ") {
				t.Errorf("the tenant's copy of the launcher pod: %v, want GPU_RESOURCE_FORBIDDEN", err)
			}
			return ctx
		}).
		Assess("G-GPU-PODS a VMI naming a device that does not exist gets no GPU", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := ctx.Value(gpuTenantKey{}).(string)
			tenant := impersonated(t, cfg, gpuTenantBob, nil)
			// The namespace holds a device, so the VMI itself is admitted:
			// the device policy sees the namespace's devices one by one.
			vmi, err := tenant.Resource(gvrVMI).Namespace(ns).Create(ctx, labVMI(ns, "vm-ghost", "gpu-ghost"), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("a VMI naming a device that does not exist: %v", err)
			}
			kubevirt, err := kubernetes.NewForConfig(impersonatedConfig(cfg, "system:serviceaccount:"+kubevirtNS+":"+kubevirtSA,
				[]string{"system:serviceaccounts", "system:serviceaccounts:" + kubevirtNS, "system:authenticated"}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = kubevirt.CoreV1().Pods(ns).Create(ctx, launcherPod(ns, vmi), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "GPU_DEVICE_NOT_HELD: ") {
				t.Errorf("KubeVirt's controller's launcher pod of a VMI that holds no device: %v, want GPU_DEVICE_NOT_HELD", err)
			}
			if _, err := clientset(t, cfg).CoreV1().Pods(ns).Get(ctx, launcherPod(ns, vmi).Name, metav1.GetOptions{}); err == nil {
				t.Errorf("a launcher pod of %s exists", vmi.GetName())
			}
			return ctx
		}).
		Teardown(uninstallGPUDevices).
		Feature()
	testenv.Test(t, f)
}

func labVMI(ns, name, device string) *unstructured.Unstructured {
	labels := map[string]any{}
	if device != "" {
		labels[gpuLabel] = device
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec": map[string]any{"domain": map[string]any{
			"devices":   map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "deviceName": labGPU}}},
			"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
		}},
	}}
}

// launcherPod is shaped like KubeVirt's virt-launcher pod of vmi: owned by
// it as controller, requesting its GPU. It runs agnhost.
func launcherPod(ns string, vmi *unstructured.Unstructured) *corev1.Pod {
	yes := true
	one := resource.MustParse("1")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + vmi.GetName(), Namespace: ns,
			Labels: map[string]string{"kubevirt.io": "virt-launcher", gpuLabel: gpuDevice},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
				Name: vmi.GetName(), UID: vmi.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "compute", Image: suite.Agnhost, Args: []string{"pause"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{labGPU: one}}}},
			TerminationGracePeriodSeconds: ptrTo(int64(0)),
		},
	}
}

func impersonatedConfig(cfg *envconf.Config, user string, groups []string) *rest.Config {
	c := rest.CopyConfig(restConfig(cfg))
	if groups == nil {
		groups = []string{"system:authenticated"}
	}
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

func impersonated(t *testing.T, cfg *envconf.Config, user string, groups []string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(impersonatedConfig(cfg, user, groups))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func pollFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitDevicePhase(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, phase string) *unstructured.Unstructured {
	t.Helper()
	var d *unstructured.Unstructured
	pollFor(ctx, t, time.Minute, "GPUDevice "+gpuDevice+" to be "+phase, func(ctx context.Context) bool {
		var err error
		d, err = dynamicClientFor(t, cfg).Resource(gvrGPUDevice).Namespace(ns).Get(ctx, gpuDevice, metav1.GetOptions{})
		got, _, _ := unstructured.NestedString(d.Object, "status", "phase")
		return err == nil && got == phase
	})
	return d
}

// installGPUDevices: KubeVirt's CRDs, a tenant namespace whose user may
// order devices and create VMIs and pods, KubeVirt's controller account
// (for pods), the chart with gpuDevicePolicies, the lab device plugin on
// every worker and a GPUClass of its resource.
func installGPUDevices(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	cs := clientset(t, cfg)
	if err := labCluster(t, cfg).ApplyCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := labCluster(t, cfg).ApplyKubeVirtCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	ns := envconf.RandomName("xg-gpu", 12)
	ctx = context.WithValue(ctx, gpuTenantKey{}, ns)
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"guard.xila.us/tenant": ns}}},
		{ObjectMeta: metav1.ObjectMeta{Name: kubevirtNS}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	// What KubeVirt's and the platform's roles would grant: the tenant
	// user and KubeVirt's controller write in the tenant namespace.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gpu-e2e", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"", "kubevirt.io", "gpu.guard.xila.us"},
		Resources: []string{"pods", "virtualmachineinstances", "gpudevices"},
		Verbs:     []string{"get", "list", "watch", "create", "delete"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpu-e2e", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: gpuTenantBob},
			{Kind: rbacv1.ServiceAccountKind, Name: kubevirtSA, Namespace: kubevirtNS}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installChart(ctx, t, cfg, nil, map[string]any{"gpuDevicePolicies": map[string]any{"enabled": true,
		"controller": map[string]any{"replicas": 1}}})
	deployLabDevicePlugin(ctx, t, cs)
	createGuard(ctx, t, dynamicClientFor(t, cfg), fixture.MakeGPUClass(gpuClassName, "lab", labGPU).Vendor("xila-guard-lab").MaxCount(2).Obj())
	return ctx
}

// deployLabDevicePlugin runs the lab device plugin on every worker and
// waits until each worker offers two labGPU.
func deployLabDevicePlugin(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "xila-guard-lab-device-plugin"}
	hostPath := corev1.HostPathDirectory
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "xila-guard-lab-device-plugin", Namespace: lab.PlatformNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "plugin", Image: "xila-guard/gpudevices:" + suite.ImageTag,
						Args:            []string{"lab-device-plugin", "--resource=" + labGPU, "--count=2"},
						SecurityContext: &corev1.SecurityContext{RunAsUser: ptrTo(int64(0)), RunAsNonRoot: ptrTo(false)},
						VolumeMounts:    []corev1.VolumeMount{{Name: "device-plugins", MountPath: "/var/lib/kubelet/device-plugins"}},
					}},
					Volumes: []corev1.Volume{{Name: "device-plugins", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins", Type: &hostPath}}}},
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets(lab.PlatformNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	workers := workerNames(ctx, t, cs)
	pollFor(ctx, t, 2*time.Minute, "every worker to offer 2 "+labGPU, func(ctx context.Context) bool {
		for _, w := range workers {
			n, err := cs.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
			if err != nil {
				return false
			}
			if q := n.Status.Allocatable[corev1.ResourceName(labGPU)]; q.Value() != 2 {
				return false
			}
		}
		return true
	})
}

// uninstallGPUDevices removes what the test made: its pods and VMIs
// first, so the controller lets the device and then the class go, then
// the chart and the device plugin. KubeVirt's CRDs stay.
func uninstallGPUDevices(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	ns, _ := ctx.Value(gpuTenantKey{}).(string)
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	if ns != "" {
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = dyn.Resource(gvrVMI).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = dyn.Resource(gvrGPUDevice).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	_ = dyn.Resource(gvrGPUClass).Delete(ctx, gpuClassName, metav1.DeleteOptions{})
	// The controller drops the finalizers once nothing uses them.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvrGPUClass).Get(ctx, gpuClassName, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Errorf("GPUClass %s is not released after its devices went: %v", gpuClassName, err)
		_, _ = dyn.Resource(gvrGPUClass).Patch(ctx, gpuClassName, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	_ = cs.AppsV1().DaemonSets(lab.PlatformNamespace).Delete(ctx, "xila-guard-lab-device-plugin", metav1.DeleteOptions{})
	uninstallChart(ctx, t, cfg)
	if ns != "" {
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	return ctx
}
