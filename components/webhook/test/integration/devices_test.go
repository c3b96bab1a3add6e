//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The DRA fixtures: tenant dra owns dra-ml and the pool node dra-gpu,
// whose example-driver slice publishes gpu-0 (fresh, exclusive evidence),
// gpu-1 (evidence says time-sliced, which the policy forbids), gpu-2 (no
// evidence), gpu-3 (the slice states another UUID than the evidence) and
// gpu-4 (held by a claim of tenant acme from before the webhook ran).
const (
	draNS       = "dra-ml"
	draNode     = "dra-gpu"
	draDriver   = "gpu.example.com"
	draClass    = "gpu.example.com"
	otherClass  = "other.example.com"
	draPolicy   = "dra-policy"
	draTenant   = "dra-alice"
	timeSliced  = `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`
	nvidiaMPS   = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`
	scheduler   = "system:kube-scheduler"
	unknownDrvr = "fpga.example.com"
	// vmClass is a DeviceClass a GPUClass sells to VMs, as the GPU
	// controller's settings in gpuSettingsNS say; the VMI of UID
	// vmiHolder holds a device of it.
	vmClass       = "vm.example.com"
	gpuSettingsNS = "gpu-platform"
	vmiHolder     = "vmi-holder"
)

// setUpDevices creates tenant dra with its policy, namespace, pool node,
// evidence and slice, the device classes, the tenant's rights on claims,
// and acme's claim holding gpu-4.
func setUpDevices(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	gc, err := guardClient()
	if err != nil {
		t.Fatal(err)
	}
	policy := fixture.MakePlacementPolicy(draPolicy, v1alpha1.SourceAttested).ForbidSharing(v1alpha1.SharingTimeSlicing).
		Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{draClass, vmClass}}).Obj()
	binding := fixture.MakeTenantBinding("dra", draNS).Policy(draPolicy).Obj()
	for _, step := range []func() error{
		func() error { return gc.Post().Resource("placementpolicies").Body(policy).Do(ctx).Error() },
		func() error { return gc.Post().Resource("tenantbindings").Body(binding).Do(ctx).Error() },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, fixture.MakeNamespace(draNS).Tenant("dra").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := kube.CoreV1().Nodes().Create(ctx, fixture.MakeNode(draNode).Label(guard.LabelTenantPool, "dra").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := func(id, device string, mode v1alpha1.GPUSharingMode) v1alpha1.GPUDevice {
		return v1alpha1.GPUDevice{ID: id, Vendor: "example", Model: "Example GPU", SharingMode: mode,
			DRA: &v1alpha1.DRADeviceRef{Driver: draDriver, Pool: draNode, Device: device}}
	}
	nss := fixture.MakeNodeSecurityState(draNode, node.UID, v1alpha1.SourceAttested).Incarnation("i1").
		Device(gpu("GPU-0", "gpu-0", v1alpha1.SharingExclusive)).
		Device(gpu("GPU-1", "gpu-1", v1alpha1.SharingTimeSlicing)).
		Device(gpu("GPU-3", "gpu-3", v1alpha1.SharingExclusive)).
		Device(gpu("GPU-4", "gpu-4", v1alpha1.SharingExclusive)).Obj()
	if err := gc.Post().Resource("nodesecuritystates").Body(nss).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	res := kube.ResourceV1()
	slice := fixture.MakeResourceSlice(draNode, draDriver).GPU("gpu-0", "GPU-0", "Example GPU").GPU("gpu-1", "GPU-1", "Example GPU").
		GPU("gpu-2", "GPU-2", "Example GPU").GPU("gpu-3", "GPU-forged", "Example GPU").GPU("gpu-4", "GPU-4", "Example GPU").Obj()
	if _, err := res.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*resourcev1.DeviceClass{fixture.MakeDeviceClass(draClass, draDriver).Obj(), fixture.MakeDeviceClass(otherClass, "other.example.com").Obj()} {
		if _, err := res.DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: draNS}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"get", "create"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: draNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claims"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: draTenant}}}
	if _, err := kube.RbacV1().Roles(draNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(draNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, fixture.MakeNamespace(gpuSettingsNS).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGPUSettings(t)
	held := createClaim(t, kube, fixture.MakeResourceClaim("holds-gpu-4", tenantNS).Request("gpu", draClass, 1).Obj())
	allocate(t, kube, held, "gpu-4")
}

// gpuSettings are the GPU controller's settings: vmClass is a GPU for
// VMs, and the VMI vmiHolder of draNS holds a device of it.
func gpuSettings() *gpuv1alpha1.GPUSettings {
	return &gpuv1alpha1.GPUSettings{
		TypeMeta:   metav1.TypeMeta{APIVersion: gpuv1alpha1.GroupVersion.String(), Kind: "GPUSettings"},
		ObjectMeta: metav1.ObjectMeta{Name: gpuv1alpha1.SettingsName, Namespace: gpuSettingsNS},
		Spec: gpuv1alpha1.GPUSettingsSpec{
			DeviceClasses: []string{vmClass},
			ClaimHolders:  []string{gpuv1alpha1.ClaimHolder(draNS, vmiHolder, vmClass)},
		}}
}

// createGPUSettings creates the settings, as the GPU controller does.
func createGPUSettings(t *testing.T) {
	t.Helper()
	u, err := fixture.ToUnstructured(gpuSettings())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube2dyn(t).Resource(gvrGPUSettings).Namespace(gpuSettingsNS).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var gvrGPUSettings = gpuv1alpha1.GroupVersion.WithResource("gpusettings")

// registerDevices points the chart's two device webhooks at w: claims and
// templates in tenant namespaces, allocations everywhere, with the chart's
// match condition.
func registerDevices(t *testing.T, w *webhook) {
	t.Helper()
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	scope := admissionregistrationv1.NamespacedScope
	url := "https://" + w.addr + "/validate-resourceclaims"
	hook := func(name string, ops []admissionregistrationv1.OperationType, resources []string, sel *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name + ".devices.guard.xila.us",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"v1"}, Resources: resources, Scope: &scope}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: sel,
		}
	}
	claims := hook("claims", []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		[]string{"resourceclaims", "resourceclaimtemplates"},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: guard.LabelTenant, Operator: metav1.LabelSelectorOpExists}}})
	allocations := hook("allocations", []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, []string{"resourceclaims/status"}, nil)
	allocations.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "hands-out-a-device", Expression: chartCondition(t, "hands-out-a-device")}}
	createConfig(t, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "devices"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{claims, allocations},
	})
	// Wait until the API server calls the webhook for claims.
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c := fixture.MakeResourceClaim("probe", draNS).Request("gpu", otherClass, 1).Obj()
		_, err := kube.ResourceV1().ResourceClaims(draNS).Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return fixture.RefusedWith(err, guard.ReasonDeviceClassNotAllowed) == nil, nil
	})
	if err != nil {
		t.Fatalf("the device webhook is not called: %v", err)
	}
}

func createClaim(t *testing.T, k kubernetes.Interface, c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	t.Helper()
	out, err := k.ResourceV1().ResourceClaims(c.Namespace).Create(t.Context(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating claim %s/%s: %v", c.Namespace, c.Name, err)
	}
	return out
}

// allocate writes an allocation of one example-driver device of dra-gpu
// to the claim's first request, as k, and returns the error.
func allocateAs(t *testing.T, k kubernetes.Interface, c *resourcev1.ResourceClaim, device string, mod ...func(*fixture.ResourceClaimWrapper)) error {
	t.Helper()
	return allocateWith(t, k, c, device, metav1.UpdateOptions{}, mod...)
}

// allocateDryRun is allocateAs as a dry run: judged by the webhook, and
// stored nowhere, so that a write admitted before the webhook has seen a
// change leaves the claim as it was for the next try.
func allocateDryRun(t *testing.T, k kubernetes.Interface, c *resourcev1.ResourceClaim, device string, mod ...func(*fixture.ResourceClaimWrapper)) error {
	t.Helper()
	return allocateWith(t, k, c, device, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, mod...)
}

func allocateWith(t *testing.T, k kubernetes.Interface, c *resourcev1.ResourceClaim, device string, opts metav1.UpdateOptions, mod ...func(*fixture.ResourceClaimWrapper)) error {
	t.Helper()
	w := &fixture.ResourceClaimWrapper{ResourceClaim: *c.DeepCopy()}
	w.Status.Allocation = nil
	// As the lab's class does, the allocation partitions the device: the
	// example driver time-slices a device that no configuration shares.
	w.Allocate(c.Spec.Devices.Requests[0].Name, draDriver, draNode, device).
		AllocationConfig(resourcev1.AllocationConfigSourceClass, draDriver, fixture.ExampleSpacePartitioning)
	for _, m := range mod {
		m(w)
	}
	_, err := k.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(t.Context(), w.Obj(), opts)
	return err
}

func allocate(t *testing.T, k kubernetes.Interface, c *resourcev1.ResourceClaim, device string, mod ...func(*fixture.ResourceClaimWrapper)) {
	t.Helper()
	if err := allocateAs(t, k, c, device, mod...); err != nil {
		t.Fatalf("allocating %s to %s/%s: %v", device, c.Namespace, c.Name, err)
	}
}

// TestIntegrationDevices judges Dynamic Resource Allocation against a real
// API server: a tenant's claims as the tenant creates them, and
// allocations as kube-scheduler writes them.
func TestIntegrationDevices(t *testing.T) {
	setUpDevices(t)
	w := startWebhook(t, "--devices", "--profile=lab", "--gpu-settings-namespace="+gpuSettingsNS)
	registerDevices(t, w)
	tenant := impersonated{user: draTenant}.kube(t)
	sched := impersonated{user: scheduler}.kube(t)

	t.Run("G-DEVICE-CLAIMS claims by policy", func(t *testing.T) {
		cases := []struct {
			name  string
			claim *fixture.ResourceClaimWrapper
			want  guard.Reason
		}{
			{"allowed class", fixture.MakeResourceClaim("ok", draNS).Request("gpu", draClass, 1), ""},
			{"forbidden class", fixture.MakeResourceClaim("other", draNS).Request("gpu", otherClass, 1), guard.ReasonDeviceClassNotAllowed},
			{"forbidden subrequest", fixture.MakeResourceClaim("first", draNS).FirstAvailable("gpu", draClass, otherClass), guard.ReasonDeviceClassNotAllowed},
			{"time-slicing asked", fixture.MakeResourceClaim("sliced", draNS).Request("gpu", draClass, 1).Config(draDriver, timeSliced), guard.ReasonDeviceSharingForbidden},
			{"MPS asked (allowed)", fixture.MakeResourceClaim("mps", draNS).Request("gpu", draClass, 1).Config("gpu.nvidia.com", nvidiaMPS), ""},
			{"unread driver config", fixture.MakeResourceClaim("fpga", draNS).Request("gpu", draClass, 1).Config(unknownDrvr, `{"kind":"X"}`), guard.ReasonDeviceConfigNotAllowed},
		}
		for _, c := range cases {
			_, err := tenant.ResourceV1().ResourceClaims(draNS).Create(t.Context(), c.claim.Obj(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			expect(t, c.name, err, c.want)
		}
		tmpl := fixture.MakeResourceClaimTemplate("other", draNS, fixture.MakeResourceClaim("", "").Request("gpu", otherClass, 1).Obj()).Obj()
		_, err := tenant.ResourceV1().ResourceClaimTemplates(draNS).Create(t.Context(), tmpl, metav1.CreateOptions{})
		expect(t, "template of a forbidden class", err, guard.ReasonDeviceClassNotAllowed)
		// A namespace of no tenant is not judged at creation.
		_, err = kube.ResourceV1().ResourceClaims(plainNS).Create(t.Context(), fixture.MakeResourceClaim("any", plainNS).Request("gpu", otherClass, 1).Obj(),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		expect(t, "claim of no tenant", err, "")
	})

	t.Run("G-DEVICE-SLICES what a slice states is checked against the evidence", func(t *testing.T) {
		// The node's credentials write its slices: a device the evidence
		// does not name, or names with another UUID, is not allowed.
		for _, c := range []struct {
			claim, device string
			want          guard.Reason
		}{{"bare", "gpu-2", guard.ReasonDeviceEvidenceMissing}, {"forged", "gpu-3", guard.ReasonDeviceEvidenceMismatch}} {
			claim := createClaim(t, tenant, fixture.MakeResourceClaim(c.claim, draNS).Request("gpu", draClass, 1).Obj())
			expect(t, c.device, allocateAs(t, sched, claim, c.device), c.want)
		}
	})

	t.Run("G-GPU-PODS a claim of a GPU for VMs goes only to the launcher of a VMI holding a device of it", func(t *testing.T) {
		pod := func(name string, vmi types.UID) *corev1.Pod {
			p := fixture.MakePod(name, draNS)
			if vmi != "" {
				p.ControlledBy("kubevirt.io/v1", "VirtualMachineInstance", "vm-"+string(vmi), vmi)
			}
			out, err := kube.CoreV1().Pods(draNS).Create(t.Context(), p.Obj(), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		holder, none, plain := pod("virt-launcher-held", vmiHolder), pod("virt-launcher-none", "vmi-none"), pod("tenant-copy", "")
		claim := createClaim(t, tenant, fixture.MakeResourceClaim("vm-gpu", draNS).Request("gpu", vmClass, 1).Obj())
		reservedFor := func(p *corev1.Pod) func(*fixture.ResourceClaimWrapper) {
			return func(w *fixture.ResourceClaimWrapper) { w.ReservedFor(p.Name, p.UID) }
		}
		expect(t, "a pod of no VMI", allocateAs(t, sched, claim, "gpu-0", reservedFor(plain)), guard.ReasonGPUResourceForbidden)
		expect(t, "the launcher of a VMI holding no device", allocateAs(t, sched, claim, "gpu-0", reservedFor(none)), guard.ReasonGPUDeviceNotHeld)

		// The settings go: nothing tells a GPU for VMs from another, so
		// every allocation of a tenant is refused until they are back.
		if err := kube2dyn(t).Resource(gvrGPUSettings).Namespace(gpuSettingsNS).Delete(t.Context(), gpuv1alpha1.SettingsName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyRefused(t, func() error { return allocateDryRun(t, sched, claim, "gpu-0", reservedFor(holder)) }, guard.ReasonLookupFailed)
		createGPUSettings(t)
		eventuallyRefused(t, func() error { return allocateDryRun(t, sched, claim, "gpu-0", reservedFor(holder)) }, "")
		allocate(t, sched, claim, "gpu-0", reservedFor(holder))

		// Free gpu-0 for the steps after.
		cur, err := kube.ResourceV1().ResourceClaims(draNS).Get(t.Context(), claim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.ReservedFor, cur.Status.Allocation = nil, nil
		if _, err := sched.ResourceV1().ResourceClaims(draNS).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("G-DEVICE-ALLOCATION allocations per device", func(t *testing.T) {
		claim := func(name string) *resourcev1.ResourceClaim {
			return createClaim(t, tenant, fixture.MakeResourceClaim(name, draNS).Request("gpu", draClass, 1).Obj())
		}
		good := claim("good")
		expect(t, "compliant device", allocateAs(t, sched, good, "gpu-0"), "")
		expect(t, "time-sliced device", allocateAs(t, sched, claim("sliced"), "gpu-1"), guard.ReasonTimeSlicingForbidden)
		expect(t, "device no slice publishes", allocateAs(t, sched, claim("ghost"), "gpu-9"), guard.ReasonDeviceUnknown)
		expect(t, "device another tenant holds", allocateAs(t, sched, claim("taken"), "gpu-4"), guard.ReasonDeviceHeldByOtherTenant)
		expect(t, "class config shares by time-slicing", allocateAs(t, sched, claim("class-sliced"), "gpu-0", func(w *fixture.ResourceClaimWrapper) {
			w.AllocationConfig(resourcev1.AllocationConfigSourceClass, draDriver, timeSliced)
		}), guard.ReasonDeviceSharingForbidden)
		foreign := createClaim(t, kube, fixture.MakeResourceClaim("foreign", plainNS).Request("gpu", draClass, 1).Obj())
		expect(t, "claim of no tenant on a pool device", allocateAs(t, sched, foreign, "gpu-0"), guard.ReasonDeviceInForeignPool)

		// Reserving the allocated claim for a pod is judged again; a
		// status write that hands out nothing is not sent.
		cur, err := kube.ResourceV1().ResourceClaims(draNS).Get(t.Context(), "good", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "train", UID: "uid-train"}}
		_, err = sched.ResourceV1().ResourceClaims(draNS).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		expect(t, "reserved for a pod", err, "")

		// The evidence goes stale: deallocating is still allowed.
		setStaleState(t, draNode)
		cur, err = kube.ResourceV1().ResourceClaims(draNS).Get(t.Context(), "good", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.ReservedFor, cur.Status.Allocation = nil, nil
		_, err = sched.ResourceV1().ResourceClaims(draNS).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		expect(t, "deallocation on stale evidence", err, "")
	})

	t.Run("G-DEVICE-ALLOCATION fails closed", func(t *testing.T) {
		c := createClaim(t, tenant, fixture.MakeResourceClaim("down", draNS).Request("gpu", draClass, 1).Obj())
		w.stop()
		err := allocateAs(t, sched, c, "gpu-0")
		if err == nil {
			t.Fatal("an allocation was written while the webhook was down")
		}
	})
}

// eventuallyRefused retries write until it is refused with want ("" for
// allowed), for what the webhook learns from its caches.
func eventuallyRefused(t *testing.T, write func() error, want guard.Reason) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = write()
		if want == "" {
			return last == nil, nil
		}
		return fixture.RefusedWith(last, want) == nil, nil
	})
	if err != nil {
		t.Fatalf("want %q, last answer %v", want, last)
	}
}
