package postbind

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func gpuNode(name string, allocatable corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{guard.LabelTenantPool: "acme"}},
		Status: corev1.NodeStatus{Allocatable: allocatable}}
}

// TestCandidateCountsAllocatableGPUs checks that the evaluator learns how
// many GPUs the node offers pods, and nothing when the node is gone.
func TestCandidateCountsAllocatableGPUs(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		gpuNode("mixed", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
			"nvidia.com/gpu": resource.MustParse("1"), "nvidia.com/mig-1g.10gb": resource.MustParse("7")}),
		gpuNode("replicas", corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("8"), "nvidia.com/GH100_H100_SXM5_80GB": resource.MustParse("1")}),
		gpuNode("cpu-only", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}),
	).Build()
	count := func(n int64) *int64 { return &n }
	for name, want := range map[string]wire.Node{
		"mixed":    {Name: "mixed", UID: "uid-mixed", Pool: "acme", AllocatableGPUs: count(8), AllocatableSharedGPUs: count(0)},
		"replicas": {Name: "replicas", UID: "uid-replicas", Pool: "acme", AllocatableGPUs: count(9), AllocatableSharedGPUs: count(8)},
		"cpu-only": {Name: "cpu-only", UID: "uid-cpu-only", Pool: "acme", AllocatableGPUs: count(0), AllocatableSharedGPUs: count(0)},
		"gone":     {Name: "gone"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Candidate(context.Background(), c, name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("candidate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGPUOfferChanged(t *testing.T) {
	four := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	cases := []struct {
		name          string
		before, after corev1.ResourceList
		want          bool
	}{
		{name: "unchanged", before: four, after: four},
		{name: "other resources changed", before: four,
			after: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		{name: "device plugin registered", after: four, want: true},
		{name: "replicas added", before: four, after: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")}, want: true},
		{name: "the same count renamed as replicas of shared GPUs", before: four, after: corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("4")}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := crevent.UpdateEvent{ObjectOld: gpuNode("n", tc.before), ObjectNew: gpuNode("n", tc.after)}
			if got := gpuOfferChanged.Update(e); got != tc.want {
				t.Errorf("Update() = %v, want %v", got, tc.want)
			}
		})
	}
}
