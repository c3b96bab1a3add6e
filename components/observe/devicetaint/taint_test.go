package devicetaint

import (
	"context"
	"testing"

	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

func TestRuleNames(t *testing.T) {
	a := Rule("n1", devices.Key{Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"}, guard.ReasonEvidenceStale, resourcev1alpha3.DeviceTaintEffectNoSchedule)
	b := Rule("n1", devices.Key{Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-1"}, guard.ReasonEvidenceStale, resourcev1alpha3.DeviceTaintEffectNoSchedule)
	again := Rule("n1", devices.Key{Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"}, guard.ReasonTimeSlicingForbidden, resourcev1alpha3.DeviceTaintEffectNoExecute)
	if a.Name == b.Name {
		t.Errorf("two devices share the rule name %s", a.Name)
	}
	if a.Name != again.Name {
		t.Errorf("one device has two rule names: %s, %s", a.Name, again.Name)
	}
	if errs := validation.IsDNS1123Subdomain(a.Name); len(errs) > 0 {
		t.Errorf("rule name %s: %v", a.Name, errs)
	}
	for _, r := range guard.Reasons {
		if errs := validation.IsValidLabelValue(string(r)); len(errs) > 0 {
			t.Errorf("reason %s cannot be a taint value: %v", r, errs)
		}
	}
	if a.Labels[LabelManagedBy] != ManagedBy || a.Labels[LabelNode] != "n1" || a.Spec.Taint.Key != guard.DeviceTaintKey {
		t.Errorf("rule %+v", a)
	}
}

// A pool node whose pool no binding owns: its devices are judged under no
// policy, and tainted.
func TestNoPolicyTaints(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	node := fixture.MakeNode("n1").Label(guard.LabelTenantPool, "orphan").Obj()
	node.UID = "uid-n1"
	nss := fixture.MakeNodeSecurityState("n1", node.UID, v1alpha1.SourceMock).Incarnation("i1").
		Device(v1alpha1.GPUDevice{ID: "GPU-0", SharingMode: v1alpha1.SharingExclusive,
			DRA: &v1alpha1.DRADeviceRef{Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}).Obj()
	slice := fixture.MakeResourceSlice("n1", "gpu.example.com").GPU("gpu-0", "GPU-0", "").GPU("gpu-1", "GPU-1", "").Obj()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, nss, slice).Build()
	ev, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Tainter{Client: c, Evaluator: postbind.Local{Evaluator: ev}}
	if _, err := tr.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var rules resourcev1alpha3.DeviceTaintRuleList
	if err := c.List(context.Background(), &rules); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rules.Items {
		got[*r.Spec.DeviceSelector.Device] = r.Spec.Taint.Value
	}
	want := map[string]string{"gpu-0": string(guard.ReasonNoPolicy), "gpu-1": string(guard.ReasonDeviceEvidenceMissing)}
	if len(got) != len(want) || got["gpu-0"] != want["gpu-0"] || got["gpu-1"] != want["gpu-1"] {
		t.Errorf("taints %v, want %v", got, want)
	}
	// Out of the pool: every rule goes.
	node.Labels = nil
	if err := c.Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules.Items) != 0 {
		t.Errorf("%d rules left on a node of no pool", len(rules.Items))
	}
}
