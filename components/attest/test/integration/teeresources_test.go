//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/teeresources"
)

// TestIntegrationTEEResources: the TEE resource agent, as its own service
// account with the generated role, advertises the EPC size the attestation
// controller verified on the node, takes it back when the node's
// attestation fails, and cannot write the evidence it reads.
func TestIntegrationTEEResources(t *testing.T) {
	const epcSize = 64 << 20
	startController(t)
	f := newFixture(t, "tee-epc", allowed)
	f.backend.set(&attester.Lab{Chain: labChain(t), Measurement: allowed, EPCSize: epcSize})
	waitState(t, "tee-epc", 30*time.Second, func(nss *v1alpha1.NodeSecurityState) error {
		if err := verdict(v1alpha1.AttestationPassed, "")(nss); err != nil {
			return err
		}
		if q := nss.Spec.TEE.EPCSize; q == nil || q.Value() != epcSize {
			return fmt.Errorf("epcSize %v, want %d", q, epcSize)
		}
		return nil
	})

	c, err := client.New(teeConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	agent := &teeresources.Agent{Node: "tee-epc", Client: c}
	ctx := context.Background()
	sync := func(want int64, wantPatched bool) {
		t.Helper()
		o, err := agent.Sync(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if o.EPC != want || o.Healthy != (want > 0) || o.Patched != wantPatched {
			t.Fatalf("offer %+v, want %d bytes, patched %v", o, want, wantPatched)
		}
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "tee-epc"}, n); err != nil {
			t.Fatal(err)
		}
		for what, l := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
			if q, ok := l[teeresources.ResourceEPC]; !ok || q.Cmp(*resource.NewQuantity(want, resource.DecimalSI)) != 0 {
				t.Errorf("%s of %s is %v (present %v), want %d", what, teeresources.ResourceEPC, q.String(), ok, want)
			}
		}
	}
	sync(epcSize, true)
	// Unchanged evidence: nothing to write.
	sync(epcSize, false)

	// The agent reads the evidence; it cannot vouch for a bigger EPC.
	nss := &v1alpha1.NodeSecurityState{}
	nss.Name = "tee-epc"
	err = c.Patch(ctx, nss, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tee":{"epcSize":"1Gi"}}}`)))
	if !apierrors.IsForbidden(err) {
		t.Errorf("the agent patched the NodeSecurityState: %v, want forbidden", err)
	}

	// The node's launch no longer passes: no EPC is offered.
	f.backend.set(&attester.Lab{Chain: labChain(t), Measurement: tampered, EPCSize: epcSize})
	waitState(t, "tee-epc", 30*time.Second, verdict(v1alpha1.AttestationFailed, guard.ReasonMeasurementNotAllowed))
	sync(0, true)

	// Passing again, the EPC comes back.
	f.backend.set(&attester.Lab{Chain: labChain(t), Measurement: allowed, EPCSize: epcSize})
	waitState(t, "tee-epc", 30*time.Second, verdict(v1alpha1.AttestationPassed, ""))
	sync(epcSize, true)
}
