//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
)

// TestIntegrationMockDRAEvidence: the lab publisher names the GPUs a DRA
// driver publishes for a node in the evidence, so that an allocation of
// one is judged on evidence that matches its slice; it follows the slices
// and the node's annotation as they change.
func TestIntegrationMockDRAEvidence(t *testing.T) {
	ctx := context.Background()
	const driver = "gpu.example.com"
	startManager(t, func(mgr ctrl.Manager) error {
		return (&evidence.Publisher{Client: mgr.GetClient(), Lab: true}).SetupWithManager(mgr)
	})
	createNode(t, "mockdra-1", map[string]string{guard.LabelTenantPool: "acme",
		guard.LabelMockDRADriver: driver, guard.LabelMockSharingMode: "Exclusive"}, "boot-1")
	slice := fixture.MakeResourceSlice("mockdra-1", driver).GPU("gpu-0", "GPU-0000", "Example GPU").Obj()
	if err := k8s.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), slice) })

	// judged reads the state and checks each of the slice's devices the
	// way an allocation of it is checked: the evidence device that names
	// it, agreeing with what the slice states. It returns the modes of
	// those the evidence names, by device.
	judged := func() (map[string]v1alpha1.GPUSharingMode, error) {
		nss, err := getState("mockdra-1")
		if err != nil {
			return nil, err
		}
		if nss.Spec.Source != v1alpha1.SourceMock || !nss.Spec.Complete {
			return nil, fmt.Errorf("evidence source %s complete %v", nss.Spec.Source, nss.Spec.Complete)
		}
		s := &resourcev1.ResourceSlice{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(slice), s); err != nil {
			return nil, err
		}
		out := map[string]v1alpha1.GPUSharingMode{}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			key := devices.Key{Driver: driver, Pool: s.Spec.Pool.Name, Device: d.Name}
			dev, reason, msg := devices.Evidence(&nss.Spec, key, devices.FactsOf(driver, d))
			switch reason {
			case "":
				out[d.Name] = dev.SharingMode
			case guard.ReasonDeviceEvidenceMissing:
			default:
				return nil, fmt.Errorf("%s: %s", reason, msg)
			}
		}
		return out, nil
	}
	want := func(w map[string]v1alpha1.GPUSharingMode) func() error {
		return func() error {
			got, err := judged()
			if err != nil {
				return err
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				return fmt.Errorf("devices with evidence %v, want %v", got, w)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, want(map[string]v1alpha1.GPUSharingMode{"gpu-0": v1alpha1.SharingExclusive}))

	t.Run("a device the driver adds is named", func(t *testing.T) {
		s := &resourcev1.ResourceSlice{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(slice), s); err != nil {
			t.Fatal(err)
		}
		s.Spec.Devices = append(s.Spec.Devices, fixture.MakeResourceSlice("", driver).GPU("gpu-1", "GPU-0001", "Example GPU").Obj().Spec.Devices...)
		if err := k8s.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, want(map[string]v1alpha1.GPUSharingMode{"gpu-0": v1alpha1.SharingExclusive, "gpu-1": v1alpha1.SharingExclusive}))
	})
	t.Run("the annotation names one device time-sliced and leaves the other without evidence", func(t *testing.T) {
		patchNode(t, "mockdra-1", func(n *corev1.Node) {
			n.Annotations = map[string]string{guard.AnnotationMockDRADevices: "gpu-1=TimeSlicing"}
		})
		eventually(t, 10*time.Second, want(map[string]v1alpha1.GPUSharingMode{"gpu-1": v1alpha1.SharingTimeSlicing}))
	})
	t.Run("an annotation naming a device the slices do not hold makes the evidence incomplete", func(t *testing.T) {
		patchNode(t, "mockdra-1", func(n *corev1.Node) {
			n.Annotations = map[string]string{guard.AnnotationMockDRADevices: "gpu-1,gpu-5"}
		})
		eventually(t, 10*time.Second, func() error {
			nss, err := getState("mockdra-1")
			if err != nil {
				return err
			}
			if nss.Spec.Complete {
				return fmt.Errorf("evidence still complete: %+v", nss.Spec.Devices)
			}
			return nil
		})
	})
}
