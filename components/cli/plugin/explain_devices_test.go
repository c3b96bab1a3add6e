package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// explain names the device a pod is given: each device its claims hold,
// judged as the webhook judges the allocation.
func TestExplainDevices(t *testing.T) {
	at := clock(time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC))
	claim := "train-gpu"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "train-3", UID: "p4"},
		Spec:   corev1.PodSpec{NodeName: "gpu-1", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	slice := fixture.MakeResourceSlice("gpu-1", "gpu.nvidia.com").GPU("gpu-0", "GPU-0", "H100").GPU("gpu-1", "GPU-1", "H100").Obj()
	rc := fixture.MakeResourceClaim(claim, "acme-ml").Request("gpu", "gpu.nvidia.com", 2).
		Allocate("gpu", "gpu.nvidia.com", "gpu-1", "gpu-0").Allocate("gpu", "gpu.nvidia.com", "gpu-1", "gpu-1").Obj()
	c := world(t, pod, slice, rc).Build()
	ctx := context.Background()
	// The evidence of gpu-1 names gpu-0 as a DRA device, not gpu-1.
	nss := &v1alpha1.NodeSecurityState{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, nss); err != nil {
		t.Fatal(err)
	}
	nss.Spec.Devices[0].DRA = &v1alpha1.DRADeviceRef{Driver: "gpu.nvidia.com", Pool: "gpu-1", Device: "gpu-0"}
	if err := c.Update(ctx, nss); err != nil {
		t.Fatal(err)
	}
	e, err := Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "train-3")
	if err != nil {
		t.Fatal(err)
	}
	if e.DeviceNote != "" || len(e.Devices) != 2 {
		t.Fatalf("devices %+v, note %q", e.Devices, e.DeviceNote)
	}
	got := map[string]DeviceExplanation{}
	for _, d := range e.Devices {
		got[d.Device] = d
	}
	if d := got["gpu.nvidia.com/gpu-1/gpu-0"]; d.Decision != guard.DecisionAllow || d.Node != "gpu-1" || d.Claim != claim {
		t.Errorf("gpu-0: %+v, want allowed on gpu-1", d)
	}
	if d := got["gpu.nvidia.com/gpu-1/gpu-1"]; d.Decision != guard.DecisionDeny || len(d.Reasons) != 1 || d.Reasons[0] != guard.ReasonDeviceEvidenceMissing {
		t.Errorf("gpu-1: %+v, want DEVICE_EVIDENCE_MISSING", d)
	}
	var out bytes.Buffer
	PrintExplanation(&out, e)
	if !strings.Contains(out.String(), "gpu.nvidia.com/gpu-1/gpu-1") || !strings.Contains(out.String(), "DEVICE_EVIDENCE_MISSING") {
		t.Errorf("the explanation does not name the refused device:\n%s", out.String())
	}
	// A claim that cannot be read is said, not hidden.
	pod2 := pod.DeepCopy()
	pod2.Name, pod2.UID, pod2.ResourceVersion = "train-4", "p5", ""
	missing := "gone"
	pod2.Spec.ResourceClaims[0].ResourceClaimName = &missing
	if err := c.Create(ctx, pod2); err != nil {
		t.Fatal(err)
	}
	e, err = Explain(ctx, c, guard.ProfileProduction, at, "acme-ml", "train-4")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.DeviceNote, "gone") {
		t.Errorf("device note %q, want the claim that cannot be read", e.DeviceNote)
	}
}
