//go:build integration

package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The example DRA driver's GPUs, as the tests publish them.
const (
	claimDriver = "gpu.example.com"
	claimModel  = "Example GPU"
	// claimTimeSlicing is the example driver's configuration that
	// time-slices a GPU.
	claimTimeSlicing = `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`
)

// TestIntegrationClaimedDevices: kube-scheduler's DynamicResources plugin
// runs in xila-guard-scheduler's profile and keeps the allocation of a
// claim allocated already (here by the test, as an allocator would have
// written it), reserving it for the pod at PreBind; XilaGuardEnforcement
// then judges, at Bind, the allocated device on the node's fresh
// evidence. A device the evidence does not name is not bound until the
// evidence names it; a configuration that time-slices the device, which
// the tenant's policy forbids, is not bound; a compliant device is.
func TestIntegrationClaimedDevices(t *testing.T) {
	startScheduler(t, pluginArgs{})
	tn := newTenant(t)
	node := newNode(t, tn.id)
	// The node's evidence names gpu-0 and gpu-2; its slice publishes gpu-0,
	// gpu-1 and gpu-2.
	setDeviceEvidence(t, node, "gpu-0", "gpu-2")
	slice := fixture.MakeResourceSlice(node.Name, claimDriver).
		GPU("gpu-0", gpuID("gpu-0"), claimModel).GPU("gpu-1", gpuID("gpu-1"), claimModel).GPU("gpu-2", gpuID("gpu-2"), claimModel).Obj()
	create(t, slice)
	class := fixture.MakeDeviceClass("gpu-"+rand.String(6), claimDriver).Obj()
	create(t, class)

	t.Run("a compliant device is bound", func(t *testing.T) {
		claim := allocatedClaim(t, tn.namespace, class.Name, node, "gpu-0")
		p := newPod(t, podWithClaim(tn.namespace, claim))
		if got := waitBound(t, p); got != node.Name {
			t.Fatalf("bound to %s, want %s", got, node.Name)
		}
		reservedFor(t, claim, p)
	})
	t.Run("G-DEVICE-ALLOCATION a device the evidence does not name is bound only once it names it", func(t *testing.T) {
		claim := allocatedClaim(t, tn.namespace, class.Name, node, "gpu-1")
		p := newPod(t, podWithClaim(tn.namespace, claim))
		waitRefused(t, p, "Xila Guard refused the bind: DEVICE_EVIDENCE_MISSING", "gpu.example.com/"+node.Name+"/gpu-1")
		stayPending(t, p, 2*time.Second)
		setDeviceEvidence(t, node, "gpu-0", "gpu-1", "gpu-2")
		if got := waitBound(t, p); got != node.Name {
			t.Fatalf("bound to %s, want %s", got, node.Name)
		}
		reservedFor(t, claim, p)
	})
	t.Run("a device time-sliced by its allocation, which the policy forbids, is not bound", func(t *testing.T) {
		claim := allocatedClaim(t, tn.namespace, class.Name, node, "gpu-2", func(w *fixture.ResourceClaimWrapper) {
			w.AllocationConfig(resourcev1.AllocationConfigSourceClaim, claimDriver, claimTimeSlicing)
		})
		p := newPod(t, podWithClaim(tn.namespace, claim))
		waitRefused(t, p, "Xila Guard refused the bind: DEVICE_SHARING_FORBIDDEN", "TimeSlicing")
		stayPending(t, p, 2*time.Second)
	})
}

// gpuID is the uuid of a device, as its slice and the evidence state it.
func gpuID(device string) string { return "GPU-" + device }

// setDeviceEvidence creates or replaces the node's NodeSecurityState:
// compliant, attested evidence whose GPUs are the example driver's devices
// of the node's pool.
func setDeviceEvidence(t *testing.T, n *corev1.Node, devices ...string) {
	t.Helper()
	ctx := context.Background()
	b := fixture.MakeNodeSecurityState(n.Name, n.UID, v1alpha1.SourceAttested).Incarnation("boot-1")
	for _, d := range devices {
		b.Device(v1alpha1.GPUDevice{ID: gpuID(d), Vendor: "example", Model: claimModel, SharingMode: v1alpha1.SharingExclusive,
			DRA: &v1alpha1.DRADeviceRef{Driver: claimDriver, Pool: n.Name, Device: d}})
	}
	want := b.Obj()
	want.Labels = n.Labels
	var nss v1alpha1.NodeSecurityState
	err := k8s.Get(ctx, client.ObjectKey{Name: n.Name}, &nss)
	switch {
	case err == nil:
		nss.Spec = want.Spec
		err = k8s.Update(ctx, &nss)
	case client.IgnoreNotFound(err) == nil:
		nss = *want
		if err = k8s.Create(ctx, &nss); err == nil {
			// Deleted when the test that created it ends, not a subtest
			// that only changed it.
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), &nss) })
		}
	}
	if err != nil {
		t.Fatalf("setting the evidence of %s: %v", n.Name, err)
	}
}

// allocatedClaim creates a claim for one GPU of the class and writes, as
// the cluster's administrator, its allocation of the device of the node's
// pool, on that node, as kube-scheduler's allocator writes one.
func allocatedClaim(t *testing.T, namespace, class string, n *corev1.Node, device string, mod ...func(*fixture.ResourceClaimWrapper)) *resourcev1.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	c := fixture.MakeResourceClaim("c-"+rand.String(6), namespace).Request("gpu", class, 1).Obj()
	created, err := kube.ResourceV1().ResourceClaims(namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating claim %s/%s: %v", namespace, c.Name, err)
	}
	t.Cleanup(func() {
		_ = kube.ResourceV1().ResourceClaims(namespace).Delete(context.Background(), c.Name, metav1.DeleteOptions{})
	})
	w := &fixture.ResourceClaimWrapper{ResourceClaim: *created}
	w.Allocate("gpu", claimDriver, n.Name, device).
		AllocationConfig(resourcev1.AllocationConfigSourceClass, claimDriver, fixture.ExampleSpacePartitioning)
	w.Status.Allocation.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
	}}}
	for _, m := range mod {
		m(w)
	}
	allocated, err := kube.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, w.Obj(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("allocating %s to claim %s/%s: %v", device, namespace, c.Name, err)
	}
	return allocated
}

// podWithClaim is a pod of the namespace that uses the claim.
func podWithClaim(namespace string, c *resourcev1.ResourceClaim) *fixture.PodWrapper {
	b := pod(namespace)
	b.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &c.Name}}
	return b
}

// reservedFor checks that the claim is reserved for the bound pod, as
// the DynamicResources plugin reserves it at PreBind.
func reservedFor(t *testing.T, c *resourcev1.ResourceClaim, p *corev1.Pod) {
	t.Helper()
	got, err := kube.ResourceV1().ResourceClaims(c.Namespace).Get(context.Background(), c.Name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == p.UID }) {
		t.Errorf("claim %s/%s is reserved for %v, not for the bound pod %s", c.Namespace, c.Name, got.Status.ReservedFor, p.UID)
	}
}
