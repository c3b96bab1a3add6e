//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// BenchmarkIntegrationAllocationWrite measures what judging an allocation
// costs the allocator: the latency of one resourceclaims/status write that
// allocates a device, through a real API server, with the device webhook
// (judged) and without it (unjudged), for nodes whose evidence and slice
// list 1, 8 and 64 devices. The two variants run in the same process on
// the same API server, alternating write by write: a judged namespace that
// the webhook's namespaceSelector picks, and an unjudged one it leaves out.
// Each write is undone (deallocated, which the webhook is not sent) before
// the next. Reports p50 and p99 in milliseconds per variant.
//
//	KUBEBUILDER_ASSETS=$PWD/_output/envtest go test -tags integration -run '^$' \
//	  -bench BenchmarkIntegrationAllocationWrite -benchtime 400x ./components/webhook/test/integration
func BenchmarkIntegrationAllocationWrite(b *testing.B) {
	w := startWebhook(b, "--devices", "--profile=lab")
	ctx := context.Background()
	gc, err := guardClient()
	if err != nil {
		b.Fatal(err)
	}
	const driver, class, policy = "gpu.example.com", "gpu.example.com", "bench-dra-policy"
	judged, unjudged := "bench-dra-judged", "bench-dra-unjudged"
	p := fixture.MakePlacementPolicy(policy, v1alpha1.SourceAttested).Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{class}}).Obj()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(gc.Post().Resource("placementpolicies").Body(p).Do(ctx).Error())
	must(gc.Post().Resource("tenantbindings").Body(fixture.MakeTenantBinding("bench-dra", judged, unjudged).Policy(policy).Obj()).Do(ctx).Error())
	for _, ns := range []string{judged, unjudged} {
		n := fixture.MakeNamespace(ns).Tenant("bench-dra").Obj()
		if ns == judged {
			n.Labels["bench.guard.xila.us/judged"] = "true"
		}
		_, err := kube.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{})
		must(err)
	}
	sizes := []int{1, 8, 64}
	for _, size := range sizes {
		name := fmt.Sprintf("bench-dra-%d", size)
		node, err := kube.CoreV1().Nodes().Create(ctx, fixture.MakeNode(name).Label(guard.LabelTenantPool, "bench-dra").Obj(), metav1.CreateOptions{})
		must(err)
		nss := fixture.MakeNodeSecurityState(name, node.UID, v1alpha1.SourceAttested).Incarnation("i1")
		slice := fixture.MakeResourceSlice(name, driver)
		for i := range size {
			dev, id := fmt.Sprintf("gpu-%d", i), fmt.Sprintf("GPU-%d-%d", size, i)
			nss.Device(v1alpha1.GPUDevice{ID: id, Vendor: "example", Model: "Example GPU", SharingMode: v1alpha1.SharingExclusive,
				DRA: &v1alpha1.DRADeviceRef{Driver: driver, Pool: name, Device: dev}})
			slice.GPU(dev, id, "Example GPU")
		}
		must(gc.Post().Resource("nodesecuritystates").Body(nss.Obj()).Do(ctx).Error())
		_, err = kube.ResourceV1().ResourceSlices().Create(ctx, slice.Obj(), metav1.CreateOptions{})
		must(err)
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	scope := admissionregistrationv1.NamespacedScope
	url := "https://" + w.addr + "/validate-resourceclaims"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-devices"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "allocations.bench.guard.xila.us",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"resourceclaims/status"}, Scope: &scope}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench.guard.xila.us/judged": "true"}},
			MatchConditions:   []admissionregistrationv1.MatchCondition{{Name: "hands-out-a-device", Expression: chartCondition(b, "hands-out-a-device")}},
		}},
	}
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
	must(err)
	defer func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	}()
	claims := map[string]*resourcev1.ResourceClaim{}
	for _, ns := range []string{judged, unjudged} {
		c, err := kube.ResourceV1().ResourceClaims(ns).Create(ctx, fixture.MakeResourceClaim("bench", ns).Request("gpu", class, 1).Obj(), metav1.CreateOptions{})
		must(err)
		claims[ns] = c
	}
	// write allocates device of node to the namespace's claim, times the
	// write, and deallocates it again.
	write := func(ns, node, device string) time.Duration {
		c := claims[ns]
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: driver, Pool: node, Device: device}}}}
		start := time.Now()
		out, err := kube.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		d := time.Since(start)
		must(err)
		out.Status.Allocation = nil
		out, err = kube.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{})
		must(err)
		claims[ns] = out
		return d
	}
	// Wait until the API server calls the webhook: a write of a device no
	// slice publishes is refused.
	must(wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c := claims[judged].DeepCopy()
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: driver, Pool: "bench-dra-1", Device: "gpu-none"}}}}
		_, err := kube.ResourceV1().ResourceClaims(judged).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return fixture.RefusedWith(err, guard.ReasonDeviceUnknown) == nil, nil
	}))
	for _, size := range sizes {
		node := fmt.Sprintf("bench-dra-%d", size)
		b.Run(fmt.Sprintf("devices=%d", size), func(b *testing.B) {
			lat := map[string][]time.Duration{}
			i := 0
			for b.Loop() {
				device := fmt.Sprintf("gpu-%d", i%size)
				// Alternate which variant goes first.
				order := []string{judged, unjudged}
				if i%2 == 1 {
					order = []string{unjudged, judged}
				}
				for _, ns := range order {
					lat[ns] = append(lat[ns], write(ns, node, device))
				}
				i++
			}
			for _, v := range []struct{ ns, name string }{{judged, "judged"}, {unjudged, "unjudged"}} {
				ds := lat[v.ns]
				slices.Sort(ds)
				b.ReportMetric(ms(ds[len(ds)/2]), v.name+"-p50-ms")
				b.ReportMetric(ms(ds[min(len(ds)-1, len(ds)*99/100)]), v.name+"-p99-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
