//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// realDRASteps run a real Dynamic Resource Allocation driver on the
// platform (TestPlatform, whose release judges devices, webhook.devices):
// the DRA example driver, built from its Go module (DRA_EXAMPLE_IMAGE) and
// installed from the chart of that module (DRA_EXAMPLE_CHART), publishes
// three simulated GPUs per worker. On the compliant worker the evidence
// names the first GPU exclusive, the second time-sliced, and not the
// third; on the time-sliced worker every GPU time-sliced. The controlled
// scheduler's DynamicResources plugin allocates, the webhook judges each
// allocation it writes, and the driver's kubelet plugin prepares what is
// admitted before the pod's container starts. The pods require the
// compliant worker and their claims a GPU by index: nothing here tells the
// allocator which devices the policy allows (that is what the observe
// controller's device taints do, TestObserve), so it would keep choosing a
// device whose allocation is refused. The tenant's policy lists
// the driver's DeviceClass while the steps run.
func realDRASteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	const (
		// The claims pass the driver space partitioning, and ask for the
		// GPU of index 0 (exclusive on the compliant worker) or 1
		// (time-sliced there); bare passes no configuration, which the
		// driver time-slices.
		exclusive = "gpu-0-partitioned"
		sliced    = "gpu-1-partitioned"
		bare      = "gpu-0-bare"
	)
	return f.
		Assess("real DRA driver: installed from its chart, its kubelet plugin on the pool nodes publishes each worker's GPUs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			slices, err := l.InstallDRADriver(ctx, suite.DRAExampleChart, suite.DRAExampleImage, 3, l.Tenant.Workers)
			if err != nil {
				t.Fatal(err)
			}
			w := l.Tenant.Workers
			if err := l.Tenant.DRAEvidence(ctx, slices, map[string][]lab.DRADevice{
				w[lab.CompliantWorker]:  {{Name: "gpu-0", Mode: v1alpha1.SharingExclusive}, {Name: "gpu-1", Mode: v1alpha1.SharingTimeSlicing}},
				w[lab.TimeSlicedWorker]: {{Name: "gpu-0"}, {Name: "gpu-1"}, {Name: "gpu-2"}},
			}); err != nil {
				t.Fatal(err)
			}
			policy := lab.PoolPolicy(l.Tenant.Name).Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{lab.DRADriver}}).Obj()
			if err := l.Replace(ctx, policy); err != nil {
				t.Fatal(err)
			}
			tenant := tenantClient(t, l)
			ns := l.Tenant.Name
			for name, claim := range map[string]*fixture.ResourceClaimWrapper{
				exclusive: indexed(fixture.MakeResourceClaim("", ns).Request("gpu", lab.DRADriver, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning), 0),
				sliced:    indexed(fixture.MakeResourceClaim("", ns).Request("gpu", lab.DRADriver, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning), 1),
				bare:      indexed(fixture.MakeResourceClaim("", ns).Request("gpu", lab.DRADriver, 1), 0),
			} {
				tpl := fixture.MakeResourceClaimTemplate(name, ns, claim.Obj()).Obj()
				if _, err := tenant.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
					t.Fatalf("the tenant creating claim template %s: %v", name, err)
				}
			}
			return ctx
		}).
		Assess("G-DEVICE-ALLOCATION real DRA driver: the tenant's claim is allocated the exclusive GPU of a worker that also holds a time-sliced one, the allocation admitted and the GPU prepared", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			if _, err := tenantClient(t, l).CoreV1().Pods(ns).Create(ctx, l.Pod("dra-first", lab.WithClaimFromTemplate(exclusive), lab.PinnedTo(worker)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Running means the kubelet had the driver prepare the claim's
			// device before it started the container.
			p := waitRunning(ctx, t, l.Kube, ns, "dra-first")
			if p.Spec.NodeName != worker {
				t.Errorf("pod ran on %s, want the compliant worker %s", p.Spec.NodeName, worker)
			}
			c := podClaim(ctx, t, l.Kube, p)
			if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
				t.Fatalf("claim %s: allocation %+v, want one device", c.Name, c.Status.Allocation)
			}
			r := c.Status.Allocation.Devices.Results[0]
			if got, want := fmt.Sprintf("%s/%s/%s", r.Driver, r.Pool, r.Device), lab.DRADriver+"/"+worker+"/gpu-0"; got != want {
				t.Errorf("claim %s was given %s, want %s, the GPU the evidence names", c.Name, got, want)
			}
			if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
				t.Errorf("claim %s is reserved for %+v, want the pod only", c.Name, c.Status.ReservedFor)
			}
			return ctx
		}).
		Assess("G-DEVICE-ALLOCATION real DRA driver: what another allocator writes is judged too: the GPU the evidence does not name, and the GPU the tenant's pod holds for a second tenant's claim, are refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			// kube-scheduler's own identity: its role may write every claim's
			// allocation, as Volcano's and KAI's allocators' roles may.
			allocator, _, err := l.As("system:kube-scheduler")
			if err != nil {
				t.Fatal(err)
			}
			claim := func(ns, name string) *resourcev1.ResourceClaim {
				c := fixture.MakeResourceClaim(name, ns).Request("gpu", lab.DRADriver, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning).Obj()
				created, err := l.Kube.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("creating claim %s/%s: %v", ns, name, err)
				}
				return created
			}
			unnamed := allocateByHand(ctx, allocator, claim(ns, "by-hand"), worker, "gpu-2")
			if err := fixture.RefusedWith(unnamed, guard.ReasonDeviceEvidenceMissing); err != nil {
				t.Errorf("the GPU the evidence does not name: %v", err)
			}
			other := envconf.RandomName("xg-dra-other", 16)
			if err := l.CreateTenantOf(ctx, lab.PoolPolicy(other).Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{lab.DRADriver}}).Obj()); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.DeleteTenant(ctx, other); err != nil {
					t.Errorf("deleting the second tenant: %v", err)
				}
			}()
			held := allocateByHand(ctx, allocator, claim(other, "taken"), worker, "gpu-0")
			if err := fixture.RefusedWith(held, guard.ReasonDeviceHeldByOtherTenant); err != nil {
				t.Errorf("the GPU the tenant's pod holds, for a second tenant's claim: %v", err)
			}
			return ctx
		}).
		Assess("G-DEVICE-ALLOCATION real DRA driver: a second claim asks for the worker's time-sliced GPU: the allocation is refused and the pod stays Pending", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			if _, err := tenantClient(t, l).CoreV1().Pods(ns).Create(ctx, l.Pod("dra-second", lab.WithClaimFromTemplate(sliced), lab.PinnedTo(worker)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitDeviceRefused(ctx, t, l, "dra-second", guard.ReasonTimeSlicingForbidden, "gpu-1")
			p, err := l.Kube.CoreV1().Pods(ns).Get(ctx, "dra-second", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c := podClaim(ctx, t, l.Kube, p); c.Status.Allocation != nil {
				t.Errorf("claim %s holds %+v, want no allocation", c.Name, c.Status.Allocation.Devices.Results)
			}
			return ctx
		}).
		Assess("G-DEVICE-ALLOCATION real DRA driver: a claim that passes no configuration, which the driver time-slices, is refused the free exclusive GPU; one that time-slices it is refused at creation", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			tenant := tenantClient(t, l)
			for _, name := range []string{"dra-first", "dra-second"} {
				if err := lab.DeletePod(ctx, l.Kube, ns, name); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tenant.CoreV1().Pods(ns).Create(ctx, l.Pod("dra-bare", lab.WithClaimFromTemplate(bare), lab.PinnedTo(worker)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitDeviceRefused(ctx, t, l, "dra-bare", guard.ReasonTimeSlicingForbidden, "gpu-0")
			sliced := fixture.MakeResourceClaim("sliced", ns).Request("gpu", lab.DRADriver, 1).
				Config(lab.DRADriver, `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`).Obj()
			_, err := tenant.ResourceV1().ResourceClaims(ns).Create(ctx, sliced, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err := fixture.RefusedWith(err, guard.ReasonDeviceSharingForbidden); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Assess("G-GPU-PODS real DRA driver: a VMI takes its GPU through a claim of a class for VMs: the tenant's own pod is refused the allocation; KubeVirt's launcher pod of the VMI holding a device of the class gets it", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			if err := lab.DeletePod(ctx, l.Kube, ns, "dra-bare"); err != nil {
				t.Fatal(err)
			}
			// The platform sells the driver's GPUs to VMs under a DeviceClass
			// of their own; the tenant's policy allows it too.
			if _, err := l.Kube.ResourceV1().DeviceClasses().Create(ctx, fixture.MakeDeviceClass(vmDeviceClass, lab.DRADriver).Obj(), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := l.Replace(ctx, fixture.MakeGPUClass(vmGPUClass, "example", vmDeviceClass).Vendor("example").
				SourceKind(gpuv1alpha1.GPUSourceResourceClaim).Obj()); err != nil {
				t.Fatal(err)
			}
			policy := lab.PoolPolicy(ns).Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{lab.DRADriver, vmDeviceClass}}).Obj()
			if err := l.Replace(ctx, policy); err != nil {
				t.Fatal(err)
			}
			if err := l.GrantKubeVirt(ctx, ns, l.User); err != nil {
				t.Fatal(err)
			}
			tenantKube, tenantDyn, err := l.As(l.User)
			if err != nil {
				t.Fatal(err)
			}
			// The tenant orders a device of the class, a claim template
			// for the GPU of index 0 (exclusive on the compliant worker),
			// and a VMI that holds the device and takes its GPU through a
			// claim of the template.
			device, err := fixture.ToUnstructured(fixture.MakeGPUDevice(vmDevice, ns, vmGPUClass).Obj())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tenantDyn.Resource(gvrGPUDevice).Namespace(ns).Create(ctx, device, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the tenant orders a device: %v", err)
			}
			tpl := fixture.MakeResourceClaimTemplate(vmTemplate, ns,
				indexed(fixture.MakeResourceClaim("", ns).Request("gpu", vmDeviceClass, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning), 0).Obj()).Obj()
			if _, err := tenantKube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the tenant creating claim template %s: %v", vmTemplate, err)
			}
			vmi, err := tenantDyn.Resource(lab.GVRVMI).Namespace(ns).Create(ctx, lab.VMIWithClaimGPU(ns, "vm-dra", vmDevice, vmTemplate), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("the tenant's VMI that takes its GPU through a claim: %v", err)
			}
			if err := l.WaitClaimHolder(ctx, ns, vmi.GetUID(), vmDeviceClass); err != nil {
				t.Fatal(err)
			}

			// The tenant's own pod of the same template is under no VMI's
			// control: its claim's allocation is refused, the GPU free.
			if _, err := tenantKube.CoreV1().Pods(ns).Create(ctx, l.Pod("vm-gpu-copy", lab.WithClaimFromTemplate(vmTemplate), lab.PinnedTo(worker)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := lab.WaitPendingMatching(ctx, l.Kube, ns, "vm-gpu-copy", func(msg string) bool {
				return strings.Contains(msg, string(guard.ReasonGPUResourceForbidden)) && strings.Contains(msg, vmDeviceClass)
			}); err != nil {
				t.Fatalf("the tenant's own pod of the VMI's claim template: want its allocation refused with %s: %v", guard.ReasonGPUResourceForbidden, err)
			}
			if err := lab.DeletePod(ctx, l.Kube, ns, "vm-gpu-copy"); err != nil {
				t.Fatal(err)
			}
			// Nor may the tenant dress its pod as the VMI's launcher.
			_, err = tenantKube.CoreV1().Pods(ns).Create(ctx, l.Pod("vm-gpu-forged", lab.WithClaimFromTemplate(vmTemplate),
				lab.ControlledByVMI(vmi.GetName(), vmi.GetUID())), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err := fixture.RefusedWith(err, guard.ReasonGPUResourceForbidden); err != nil {
				t.Errorf("the tenant's pod under the VMI's control: %v", err)
			}

			// KubeVirt's controller makes the launcher pod: it runs, and its
			// claim holds the GPU.
			kubevirt, _, err := l.As(lab.KubeVirtController, "system:serviceaccounts", "system:serviceaccounts:"+lab.KubeVirtNamespace)
			if err != nil {
				t.Fatal(err)
			}
			launcher := l.Pod("virt-launcher-vm-dra", lab.WithClaimFromTemplate(vmTemplate), lab.PinnedTo(worker), lab.ControlledByVMI(vmi.GetName(), vmi.GetUID()))
			if _, err := kubevirt.CoreV1().Pods(ns).Create(ctx, launcher, metav1.CreateOptions{}); err != nil {
				t.Fatalf("KubeVirt's controller creating the launcher pod: %v", err)
			}
			p := waitRunning(ctx, t, l.Kube, ns, launcher.Name)
			c := podClaim(ctx, t, l.Kube, p)
			if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
				t.Fatalf("claim %s: allocation %+v, want one device", c.Name, c.Status.Allocation)
			}
			if r := c.Status.Allocation.Devices.Results[0]; r.Pool != worker || r.Device != "gpu-0" {
				t.Errorf("the launcher's claim holds %s/%s, want %s/gpu-0", r.Pool, r.Device, worker)
			}
			if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
				t.Errorf("claim %s is reserved for %+v, want the launcher pod only", c.Name, c.Status.ReservedFor)
			}
			return ctx
		}).
		Assess("real DRA driver: uninstalled, the tenant's policy and evidence as they were", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			tearDownDRA(ctx, t, labFrom(ctx, t))
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Again, for a run that stopped half-way: each part is idempotent.
			if l, ok := ctx.Value(labKey{}).(*lab.Lab); ok {
				tearDownDRA(ctx, t, l)
			}
			return ctx
		})
}

// The GPU for VMs of realDRASteps: the DeviceClass of the driver's GPUs
// that the platform sells to VMs, its GPUClass, the tenant's device of it
// and the claim template of the VMI.
const (
	vmDeviceClass = "vm.gpu.example.com"
	vmGPUClass    = "vm-example-gpu"
	vmDevice      = "vm-gpu"
	vmTemplate    = "vm-gpu"
)

// tearDownDRA removes what realDRASteps made, and gives the tenant its
// policy and mock evidence back for the steps that follow.
func tearDownDRA(ctx context.Context, t *testing.T, l *lab.Lab) {
	ns := l.Tenant.Name
	for _, name := range []string{"dra-first", "dra-second", "dra-bare", "vm-gpu-copy", "virt-launcher-vm-dra"} {
		if err := lab.DeletePod(ctx, l.Kube, ns, name); err != nil {
			t.Errorf("deleting pod %s: %v", name, err)
		}
	}
	// The VMI first: its device, and then the class, follow once no VMI
	// holds them.
	_ = l.Dyn.Resource(lab.GVRVMI).Namespace(ns).Delete(ctx, "vm-dra", metav1.DeleteOptions{})
	_ = l.Dyn.Resource(gvrGPUDevice).Namespace(ns).Delete(ctx, vmDevice, metav1.DeleteOptions{})
	_ = l.Dyn.Resource(gvrGPUClass).Delete(ctx, vmGPUClass, metav1.DeleteOptions{})
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := l.Dyn.Resource(gvrGPUClass).Get(ctx, vmGPUClass, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("GPUClass %s is not released after its device went: %v", vmGPUClass, err)
	}
	if err := l.Kube.ResourceV1().DeviceClasses().Delete(ctx, vmDeviceClass, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting DeviceClass %s: %v", vmDeviceClass, err)
	}
	if err := l.Kube.ResourceV1().ResourceClaimTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the claim templates: %v", err)
	}
	if err := l.Kube.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the claims: %v", err)
	}
	if err := l.UninstallDRADriver(ctx); err != nil {
		t.Errorf("uninstalling the DRA driver: %v", err)
	}
	if err := l.Replace(ctx, lab.PoolPolicy(ns).Obj()); err != nil {
		t.Errorf("restoring the tenant's policy: %v", err)
	}
	if err := l.Tenant.RestoreEvidence(ctx); err != nil {
		t.Errorf("restoring the mock evidence: %v", err)
	}
}

// indexed makes the claim's request ask for the driver's GPU of index i:
// the example driver publishes its devices in no fixed order, and nothing
// else tells kube-scheduler's allocator which of them the policy allows.
func indexed(c *fixture.ResourceClaimWrapper, i int) *fixture.ResourceClaimWrapper {
	r := c.Spec.Devices.Requests[0].Exactly
	r.Selectors = append(r.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{
		Expression: fmt.Sprintf(`device.attributes[%q].index == %d`, lab.DRADriver, i)}})
	return c
}

// waitDeviceRefused waits until the tenant's pod is reported unschedulable
// because the compliant worker's GPU device was refused for reason, and
// fails the test if the pod gets bound. The time-sliced worker is refused
// for the pod as a whole; the device named in the message tells the
// device's refusal from that one.
func waitDeviceRefused(ctx context.Context, t *testing.T, l *lab.Lab, pod string, reason guard.Reason, device string) {
	t.Helper()
	key := lab.DRADriver + "/" + l.Tenant.Workers[lab.CompliantWorker] + "/" + device
	err := lab.WaitPendingMatching(ctx, l.Kube, l.Tenant.Name, pod, func(msg string) bool {
		return strings.Contains(msg, string(reason)) && strings.Contains(msg, key)
	})
	if err != nil {
		t.Fatalf("want device %s refused with %s: %v", key, reason, err)
	}
}

// allocateByHand writes an allocation of one device of node's pool to the
// claim's request, with the claim's configuration, as kube writes it.
func allocateByHand(ctx context.Context, kube kubernetes.Interface, c *resourcev1.ResourceClaim, node, device string) error {
	w := &fixture.ResourceClaimWrapper{ResourceClaim: *c.DeepCopy()}
	w.Allocate("gpu", lab.DRADriver, node, device).
		AllocationConfig(resourcev1.AllocationConfigSourceClaim, lab.DRADriver, fixture.ExampleSpacePartitioning)
	_, err := kube.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, w.Obj(), metav1.UpdateOptions{})
	return err
}

// tenantClient acts as the tenant's user.
func tenantClient(t *testing.T, l *lab.Lab) kubernetes.Interface {
	t.Helper()
	k, _, err := l.As(l.User)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// podClaim returns the ResourceClaim the resource claim controller made
// for a pod from its template.
func podClaim(ctx context.Context, t *testing.T, kube kubernetes.Interface, p *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			c, err := kube.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatalf("pod %s/%s has no claim made for it yet (status %+v)", p.Namespace, p.Name, p.Status.ResourceClaimStatuses)
	return nil
}

// draTaintedNotAllocated runs the real DRA driver on TestObserve's pool,
// whose evidence (nfd) names no DRA device: the observe controller taints
// every GPU the driver publishes (DEVICE_EVIDENCE_MISSING), and the stock
// kube-scheduler gives none of them to a claim; a claim that tolerates the
// guard's taint, which the webhook refuses to tenants (G-DEVICE-CLAIMS),
// gets one at once, so the taint is what keeps the other out. When the
// driver goes, so do the taints.
func draTaintedNotAllocated(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	o := observedFrom(ctx, t)
	cs := clientset(t, cfg)
	l := labCluster(t, cfg)
	if _, err := l.InstallDRADriver(ctx, suite.DRAExampleChart, suite.DRAExampleImage, 2, o.workers); err != nil {
		t.Fatal(err)
	}
	missing := string(guard.ReasonDeviceEvidenceMissing)
	for _, w := range o.workers {
		waitDeviceTaints(ctx, t, cs, w, missing, missing)
	}
	templates := map[string]*fixture.ResourceClaimWrapper{
		"gpu":          fixture.MakeResourceClaim("", o.tenant).Request("gpu", lab.DRADriver, 1),
		"gpu-tolerant": fixture.MakeResourceClaim("", o.tenant).Request("gpu", lab.DRADriver, 1),
	}
	templates["gpu-tolerant"].Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{
		Key: guard.DeviceTaintKey, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	for name, c := range templates {
		if _, err := cs.ResourceV1().ResourceClaimTemplates(o.tenant).Create(ctx, fixture.MakeResourceClaimTemplate(name, o.tenant, c.Obj()).Obj(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]string{"dra-untainted-only": "gpu", "dra-tolerant": "gpu-tolerant"}
	defer func() {
		for name := range pods {
			if err := lab.DeletePod(ctx, cs, o.tenant, name); err != nil {
				t.Errorf("deleting pod %s: %v", name, err)
			}
		}
		_ = cs.ResourceV1().ResourceClaimTemplates(o.tenant).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err := l.UninstallDRADriver(ctx); err != nil {
			t.Errorf("uninstalling the DRA driver: %v", err)
		}
		for _, w := range o.workers {
			waitDeviceTaints(ctx, t, cs, w)
		}
	}()
	for name, template := range pods {
		p := fixture.MakePod(name, o.tenant).Image(suite.Agnhost, corev1.PullNever).Args("pause").Obj()
		p.Spec.Tolerations = []corev1.Toleration{{Key: lab.PoolLabel, Operator: corev1.TolerationOpEqual, Value: o.tenant, Effect: corev1.TaintEffectNoSchedule}}
		lab.WithClaimFromTemplate(template)(p)
		if _, err := cs.CoreV1().Pods(o.tenant).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(ctx, t, cs, o.tenant, "dra-tolerant")
	err := lab.WaitPendingMatching(ctx, cs, o.tenant, "dra-untainted-only", func(string) bool { return true })
	if err != nil {
		t.Fatalf("the pod whose claim does not tolerate the taint: %v", err)
	}
	p, err := cs.CoreV1().Pods(o.tenant).Get(ctx, "dra-untainted-only", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := podClaim(ctx, t, cs, p); c.Status.Allocation != nil {
		t.Errorf("claim %s was given %+v, a tainted device", c.Name, c.Status.Allocation.Devices.Results)
	}
	return ctx
}
