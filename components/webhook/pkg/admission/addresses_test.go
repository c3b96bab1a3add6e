package admission

import (
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TestPodAddresses: a status write gives a protected pod only addresses
// of its own node's pod ranges, whoever writes it; nodes without ranges,
// pods of no tenant and host-network pods are not judged.
func TestPodAddresses(t *testing.T) {
	c := newFakeCluster()
	c.nodes[poolNode].Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
	c.nodes["ranges-broken"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ranges-broken"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.9.0/33"}}}
	c.nodes["legacy"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24"}}
	h := newValidator(t, c, &fakeEvaluator{verdict: allowVerdict()}).PodsHandler()
	kubelet := "system:node:" + poolNode
	running := func(ns, node string, ips ...string) *corev1.Pod {
		p := makePod(ns).nodeName(node).obj()
		if len(ips) > 0 {
			p.Status.PodIP = ips[0]
		}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		ns, user string
		old, obj *corev1.Pod
		want     guard.Reason
	}{
		{"the kubelet gives its pod an address of its range", tenantNS, kubelet, running(tenantNS, poolNode), running(tenantNS, poolNode, "10.244.1.7"), ""},
		{"both families of its ranges", tenantNS, kubelet, running(tenantNS, poolNode), running(tenantNS, poolNode, "10.244.1.7", "fd00:10:244:1::7"), ""},
		{"a new sandbox re-addresses the pod within the range", tenantNS, kubelet, running(tenantNS, poolNode, "10.244.1.7"), running(tenantNS, poolNode, "10.244.1.9"), ""},
		{"the kubelet gives its pod another node's pod's address", tenantNS, kubelet, running(tenantNS, poolNode), running(tenantNS, poolNode, "10.244.2.5"), guard.ReasonPodAddressOutsideNode},
		{"an address of another family outside the ranges", tenantNS, kubelet, running(tenantNS, poolNode, "10.244.1.7"), running(tenantNS, poolNode, "10.244.1.7", "fd00:10:244:2::7"), guard.ReasonPodAddressOutsideNode},
		{"only podIPs changes", tenantNS, kubelet, running(tenantNS, poolNode, "10.244.1.7"),
			func() *corev1.Pod {
				p := running(tenantNS, poolNode, "10.244.1.7")
				p.Status.PodIPs[0].IP = "172.18.0.3"
				return p
			}(), guard.ReasonPodAddressOutsideNode},
		{"an address that does not parse", tenantNS, kubelet, running(tenantNS, poolNode), running(tenantNS, poolNode, "10.244.1.300"), guard.ReasonPodAddressOutsideNode},
		{"an administrator writes the address", unlabelledNS, "kubernetes-admin", running(unlabelledNS, poolNode), running(unlabelledNS, poolNode, "10.244.2.5"), guard.ReasonPodAddressOutsideNode},
		{"a pod bound to no node gets addresses", tenantNS, "kubernetes-admin", running(tenantNS, ""), running(tenantNS, "", "10.244.1.7"), guard.ReasonPodAddressOutsideNode},
		{"a pod on a node that is not known", tenantNS, "kubernetes-admin", running(tenantNS, "gone"), running(tenantNS, "gone", "10.244.1.7"), guard.ReasonNodeUnknown},
		{"a node whose range does not parse", tenantNS, "system:node:ranges-broken", running(tenantNS, "ranges-broken"), running(tenantNS, "ranges-broken", "10.244.9.1"), guard.ReasonPodAddressOutsideNode},
		{"a node's single podCIDR", tenantNS, "system:node:legacy", running(tenantNS, "legacy"), running(tenantNS, "legacy", "10.244.8.1"), guard.ReasonPodAddressOutsideNode},
		{"a node without ranges is not judged", tenantNS, "system:node:" + plainNode, running(tenantNS, plainNode), running(tenantNS, plainNode, "10.244.2.5"), ""},
		{"a pod of no tenant", "team-web", kubelet, running("team-web", poolNode), running("team-web", poolNode, "10.244.2.5"), ""},
		{"a host-network pod", tenantNS, kubelet, running(tenantNS, poolNode),
			func() *corev1.Pod {
				p := running(tenantNS, poolNode, "172.18.0.3")
				p.Spec.HostNetwork = true
				return p
			}(), ""},
		{"addresses removed", tenantNS, kubelet, running(tenantNS, poolNode, "10.244.1.7"), running(tenantNS, poolNode), ""},
	} {
		t.Run("G-POD-ADDRESS "+tc.name, func(t *testing.T) {
			resp := post(t, h, request(t, "pods", "status", admissionv1.Update, tc.ns, tc.user, tc.obj, tc.old))
			got := codes(resp)
			switch {
			case tc.want == "" && !resp.Allowed:
				t.Errorf("refused: %v", resp.Result.Message)
			case tc.want != "" && !slices.Contains(got, string(tc.want)):
				t.Errorf("codes %v (allowed %t), want %s", got, resp.Allowed, tc.want)
			}
		})
	}
	resp := post(t, h, request(t, "pods", "status", admissionv1.Create, tenantNS, kubelet, running(tenantNS, poolNode, "10.244.1.7"), nil))
	if resp.Allowed || !slices.Contains(codes(resp), string(guard.ReasonUnexpectedRequest)) {
		t.Errorf("a CREATE of pods/status: %+v, want UNEXPECTED_REQUEST", resp.Result)
	}
}
