package enforcement

import (
	"maps"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// offering gives a node allocatable GPU resources and a CPU.
func offering(n *corev1.Node, gpus map[corev1.ResourceName]string) *corev1.Node {
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	for name, q := range gpus {
		n.Status.Allocatable[name] = resource.MustParse(q)
	}
	return n
}

// TestRequestsCarryAllocatableGPUs checks that PreFilter and PreBind tell
// the evaluator how many GPUs each pool node offers pods, counted over
// every GPU resource, and that it holds the evidence against them: six
// devices account for a1's six GPUs, one does not account for a2's two.
func TestRequestsCarryAllocatableGPUs(t *testing.T) {
	w := acmeWorld()
	w.nodes[0] = offering(w.nodes[0], map[corev1.ResourceName]string{guard.ResourceGPU: "4", "nvidia.com/mig-1g.10gb": "2"})
	w.nodes[1] = offering(w.nodes[1], map[corev1.ResourceName]string{guard.ResourceGPU: "2"})
	for i := 1; i < 6; i++ {
		w.states[0].Spec.Devices = append(w.states[0].Spec.Devices, v1alpha1.GPUDevice{ID: "gpu-" + strconv.Itoa(i), SharingMode: v1alpha1.SharingExclusive})
	}
	h := w.start(t)
	p := pod(acmeNS, "train")
	c := h.schedule(p)
	check(t, "Filter a1", c.filter["a1"], want{})
	check(t, "Filter a2", c.filter["a2"], want{fwk.UnschedulableAndUnresolvable, "EVIDENCE_INCOMPLETE"})
	check(t, "PreBind a1", h.bind(c, p, "a1"), want{})
	got := h.eval.asked()
	if len(got) != 2 {
		t.Fatalf("%d evaluations, want PreFilter's and PreBind's", len(got))
	}
	counts := map[string]string{}
	for _, n := range got[0].Nodes {
		counts[n.Name] = count(n.AllocatableGPUs)
	}
	if want := map[string]string{"a1": "6", "a2": "2", "free": "unknown"}; !maps.Equal(counts, want) {
		t.Errorf("PreFilter sent allocatable GPUs %v, want %v", counts, want)
	}
	if n := got[1].Nodes[0]; n.Name != "a1" || count(n.AllocatableGPUs) != "6" {
		t.Errorf("PreBind sent %s with allocatable GPUs %s, want a1 with 6", n.Name, count(n.AllocatableGPUs))
	}
}

// TestSnapshotKeyCountsAllocatableGPUs checks that an answer is not reused
// for a node that now offers another number of GPUs.
func TestSnapshotKeyCountsAllocatableGPUs(t *testing.T) {
	h := acmeWorld().start(t)
	id, err := h.pl.caches.resolve(acmeNS)
	if err != nil {
		t.Fatal(err)
	}
	key := func(n *corev1.Node) string {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		_, _, k := h.pl.snapshot(&id, []fwk.NodeInfo{ni})
		return k
	}
	before := poolNode("a1", acme)
	after := offering(poolNode("a1", acme), map[corev1.ResourceName]string{guard.ResourceGPU: "8"})
	if key(before) == key(after) {
		t.Error("snapshots of a node before and after its device plugin registered have the same key")
	}
	if key(after) != key(offering(poolNode("a1", acme), map[corev1.ResourceName]string{guard.ResourceGPU: "8"})) {
		t.Error("identical snapshots have different keys")
	}
}

func count(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return strconv.FormatInt(*n, 10)
}
