//go:build integration

package integration

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/devicetaint"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// deviceTaints lists the tainter's rules of a node as device name →
// taint value and effect.
func deviceTaints(node string) (map[string]string, error) {
	var l resourcev1alpha3.DeviceTaintRuleList
	if err := k8s.List(context.Background(), &l, client.MatchingLabels{devicetaint.LabelNode: node}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range l.Items {
		if r.Spec.Taint.Key != guard.DeviceTaintKey || r.Spec.DeviceSelector == nil || r.Spec.DeviceSelector.Device == nil {
			return nil, fmt.Errorf("rule %s is not a device taint of the guard: %+v", r.Name, r.Spec)
		}
		out[*r.Spec.DeviceSelector.Device] = r.Spec.Taint.Value + ":" + string(r.Spec.Taint.Effect)
	}
	return out, nil
}

// TestIntegrationDeviceTaints runs the device tainter against a real API
// server serving DeviceTaintRules: the DRA devices of a pool node whose
// evidence fails the pool's policy are tainted, each with the first
// reason, and the taint goes when the evidence passes again.
func TestIntegrationDeviceTaints(t *testing.T) {
	ctx := context.Background()
	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, func(mgr ctrl.Manager) error {
		return (&devicetaint.Tainter{Client: mgr.GetClient(), Evaluator: postbind.Local{Evaluator: eval}, Resync: time.Second}).SetupWithManager(mgr, 2)
	})
	const node, driver, policy = "dt-gpu", "gpu.example.com", "dt-policy"
	create(t,
		fixture.MakeNamespace("dt-ml").Obj(),
		fixture.MakePlacementPolicy(policy, v1alpha1.SourceAttested).MaxAge(time.Minute).ForbidSharing(v1alpha1.SharingTimeSlicing).
			Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{driver}, TaintEffect: v1alpha1.DeviceTaintNoExecute}).Obj(),
		fixture.MakeTenantBinding("dt", "dt-ml").Policy(policy).Obj(),
	)
	n := fixture.MakeNode(node).Label(guard.LabelTenantPool, "dt").Obj()
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	gpu := func(id, device string, mode v1alpha1.GPUSharingMode) v1alpha1.GPUDevice {
		return v1alpha1.GPUDevice{ID: id, Vendor: "example", Model: "Example GPU", SharingMode: mode,
			DRA: &v1alpha1.DRADeviceRef{Driver: driver, Pool: node, Device: device}}
	}
	nss := fixture.MakeNodeSecurityState(node, n.UID, v1alpha1.SourceAttested).Incarnation("i1").
		Device(gpu("GPU-0", "gpu-0", v1alpha1.SharingExclusive)).Device(gpu("GPU-1", "gpu-1", v1alpha1.SharingTimeSlicing)).Obj()
	create(t, nss,
		fixture.MakeResourceSlice(node, driver).GPU("gpu-0", "GPU-0", "Example GPU").GPU("gpu-1", "GPU-1", "Example GPU").
			GPU("gpu-2", "GPU-2", "Example GPU").Obj())
	expect := func(t *testing.T, want map[string]string) {
		t.Helper()
		eventually(t, 15*time.Second, func() error {
			got, err := deviceTaints(node)
			if err != nil {
				return err
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("device taints of %s are %v, want %v", node, got, want)
			}
			return nil
		})
	}
	setObserved := func(t *testing.T, at time.Time) {
		t.Helper()
		cur := &v1alpha1.NodeSecurityState{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: node}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.ObservedAt = metav1.NewTime(at)
		if err := k8s.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("G-DEVICE-TAINTS devices whose evidence fails are tainted, each for its reason", func(t *testing.T) {
		expect(t, map[string]string{
			"gpu-1": string(guard.ReasonTimeSlicingForbidden) + ":NoExecute",
			"gpu-2": string(guard.ReasonDeviceEvidenceMissing) + ":NoSchedule",
		})
	})
	t.Run("G-DEVICE-TAINTS stale evidence taints every device, fresh evidence lifts it", func(t *testing.T) {
		setObserved(t, time.Now().Add(-time.Hour))
		expect(t, map[string]string{
			"gpu-0": string(guard.ReasonEvidenceStale) + ":NoExecute",
			"gpu-1": string(guard.ReasonEvidenceStale) + ":NoExecute",
			"gpu-2": string(guard.ReasonDeviceEvidenceMissing) + ":NoSchedule",
		})
		setObserved(t, time.Now())
		expect(t, map[string]string{
			"gpu-1": string(guard.ReasonTimeSlicingForbidden) + ":NoExecute",
			"gpu-2": string(guard.ReasonDeviceEvidenceMissing) + ":NoSchedule",
		})
	})
	t.Run("a rule someone deletes is put back", func(t *testing.T) {
		r := devicetaint.Rule(node, devices.Key{Driver: driver, Pool: node, Device: "gpu-2"}, guard.ReasonDeviceEvidenceMissing, resourcev1alpha3.DeviceTaintEffectNoSchedule)
		if err := k8s.Delete(ctx, r); err != nil {
			t.Fatal(err)
		}
		expect(t, map[string]string{
			"gpu-1": string(guard.ReasonTimeSlicingForbidden) + ":NoExecute",
			"gpu-2": string(guard.ReasonDeviceEvidenceMissing) + ":NoSchedule",
		})
	})
	t.Run("a node leaving its pool loses its device taints", func(t *testing.T) {
		patchNode(t, node, func(n *corev1.Node) { delete(n.Labels, guard.LabelTenantPool) })
		expect(t, map[string]string{})
	})
}
