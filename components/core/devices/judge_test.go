package devices

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// judgeWorld is an evaluator, acme's policy (attested evidence, no
// time-slicing, the DeviceClass class) and node n1 of acme's pool.
func judgeWorld(tb testing.TB, class string) (*evaluate.Evaluator, *wire.Policy, *corev1.Node) {
	tb.Helper()
	ev, err := evaluate.New(evaluate.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	policy := &wire.Policy{Name: "p", Spec: v1alpha1.PlacementPolicySpec{
		Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}},
		GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}},
		Devices:    &v1alpha1.DevicePolicy{DeviceClasses: []string{class}},
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1", Labels: map[string]string{guard.LabelTenantPool: "acme"}}}
	return ev, policy, node
}

// The example driver time-slices a device whose claim passes it no
// configuration, so that device is judged time-sliced: a policy that
// forbids time-slicing refuses it, and allows it only with a
// configuration that shares it in a mode the policy allows. No
// configuration takes away the sharing the evidence reports.
func TestJudgeSharingModes(t *testing.T) {
	ev, policy, node := judgeWorld(t, "gpu.example.com")
	state := &v1alpha1.NodeSecurityStateSpec{NodeUID: "uid-n1", Incarnation: "i1", ObservedAt: metav1.NewTime(time.Now()),
		Source: v1alpha1.SourceAttested, Complete: true, Devices: []v1alpha1.GPUDevice{{
			ID: "gpu-1234", Vendor: "example", Model: "LATEST-GPU-MODEL", SharingMode: v1alpha1.SharingExclusive,
			DRA: &v1alpha1.DRADeviceRef{Driver: ExampleDriver, Pool: "n1", Device: "gpu-0"}}}}
	uuid, model := "gpu-1234", "LATEST-GPU-MODEL"
	dev := &resourcev1.Device{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"uuid": {StringValue: &uuid}, "model": {StringValue: &model}}}
	c := Claim{Namespace: "acme-ml", Name: "train", Tenant: &wire.Tenant{ID: "acme"}, Policy: policy}
	judge := func(configs ...Config) []guard.Reason {
		a := Allocated{Result: &resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: ExampleDriver, Pool: "n1", Device: "gpu-0"},
			Configs: configs, Device: dev, Node: node, State: state}
		var rs []guard.Reason
		for _, f := range Judge(ev, "", guard.LabelTenantPool, c, a) {
			rs = append(rs, f.Reason)
		}
		return rs
	}
	if rs := judge(); !slices.Contains(rs, guard.ReasonTimeSlicingForbidden) {
		t.Errorf("no configuration: reasons %v, want %s", rs, guard.ReasonTimeSlicingForbidden)
	}
	if rs := judge(cfg(ExampleDriver, exSpacePart, "other")); !slices.Contains(rs, guard.ReasonTimeSlicingForbidden) {
		t.Errorf("a configuration of another request only: reasons %v, want %s", rs, guard.ReasonTimeSlicingForbidden)
	}
	if rs := judge(cfg(ExampleDriver, exSpacePart, "gpu")); len(rs) != 0 {
		t.Errorf("space partitioning, which the policy allows: reasons %v, want none", rs)
	}
	// A configuration does not take away the sharing the evidence reports.
	state.Devices[0].SharingMode = v1alpha1.SharingTimeSlicing
	if rs := judge(cfg(ExampleDriver, exSpacePart, "gpu")); !slices.Contains(rs, guard.ReasonTimeSlicingForbidden) {
		t.Errorf("evidence time-sliced, configuration space-partitioned: reasons %v, want %s", rs, guard.ReasonTimeSlicingForbidden)
	}
}
