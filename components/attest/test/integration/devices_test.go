//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/core/devices"
)

// TestIntegrationAttestedGPUs: the controller, with its generated role,
// writes the GPUs a lab TEE states in its reports, each named as the DRA
// device whose ResourceSlice on the node states its UUID, so that an
// allocation of that device is judged on attested evidence that agrees
// with its slice; a GPU no slice states stays unnamed.
func TestIntegrationAttestedGPUs(t *testing.T) {
	const driver = "gpu.example.com"
	startController(t)
	slice := fixture.MakeResourceSlice("attest-gpus", driver).GPU("gpu-0", "GPU-0000", "Example GPU").GPU("gpu-1", "GPU-unattested", "Example GPU").Obj()
	if err := k8s.Create(context.Background(), slice); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), slice) })
	f := newFixture(t, "attest-gpus", allowed)
	f.backend.set(&attester.Lab{Chain: labChain(t), Measurement: allowed, GPUs: []v1alpha1.GPUDevice{
		{ID: "GPU-0000", Vendor: "nvidia", Model: "Example GPU", CCMode: v1alpha1.CCModeOn},
		{ID: "GPU-elsewhere", Vendor: "nvidia", Model: "Example GPU", CCMode: v1alpha1.CCModeOn},
	}})
	nss := waitState(t, "attest-gpus", 30*time.Second, func(nss *v1alpha1.NodeSecurityState) error {
		if err := verdict(v1alpha1.AttestationPassed, "")(nss); err != nil {
			return err
		}
		if len(nss.Spec.Devices) != 2 {
			return fmt.Errorf("devices %+v, want the two the TEE states", nss.Spec.Devices)
		}
		return nil
	})
	if d := nss.Spec.Devices[1]; d.ID != "GPU-elsewhere" || d.DRA != nil {
		t.Errorf("a GPU no slice states: %+v, want it unnamed", d)
	}
	t.Run("G-ATTESTED-DEVICES the attested GPU's DRA device is judged on evidence that agrees with its slice, and the node's other GPU has none", func(t *testing.T) {
		for i, want := range []struct {
			name    string
			missing bool
		}{{name: "gpu-0"}, {name: "gpu-1", missing: true}} {
			d := &slice.Spec.Devices[i]
			if d.Name != want.name {
				t.Fatalf("slice device %d is %s, want %s", i, d.Name, want.name)
			}
			key := devices.Key{Driver: driver, Pool: slice.Spec.Pool.Name, Device: d.Name}
			dev, reason, msg := devices.Evidence(&nss.Spec, key, devices.FactsOf(driver, d))
			switch {
			case want.missing && reason == "":
				t.Errorf("device %s, whose UUID the TEE does not state, has evidence %+v", key, dev)
			case !want.missing && (reason != "" || dev.CCMode != v1alpha1.CCModeOn):
				t.Errorf("device %s: %s %s, evidence %+v; want the attested GPU in CC mode", key, reason, msg, dev)
			}
		}
	})
}
