// Package benchdata builds the requests that the benchmarks and core-bench
// send, so that every measurement uses the same, documented shape.
package benchdata

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Shapes of benchmark nodes: GPUsPerNode devices each. One GPU is the
// small node of most inference pools; eight is a full training server.
var GPUsPerNode = []int{1, 8}

var measurement = v1alpha1.Measurement("sha384:" + strings.Repeat("c0ffee", 16))

// Request returns a request for a pod of tenant "acme" under a policy that
// exercises every rule, with the given number of pool nodes of gpus GPUs
// each, inside an attested SEV-SNP TEE. Every fourth node is time-sliced,
// so that answers mix allows and denies. Evidence is one minute old at now.
func Request(nodes, gpus int, now time.Time) *wire.EvaluateRequest {
	req := &wire.EvaluateRequest{
		Pod:    wire.Pod{Namespace: "acme-ml", Name: "train-0", UID: "0b7c2a52-3f1e-4c7e-9d1a-5f2b8e6c4a10"},
		Tenant: &wire.Tenant{ID: "acme"},
		Policy: &wire.Policy{Name: "acme-confidential", Spec: v1alpha1.PlacementPolicySpec{
			Confinement: v1alpha1.ConfinementPool,
			Evidence: v1alpha1.EvidencePolicy{
				AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD},
				MaxAge:          &metav1.Duration{Duration: 10 * time.Minute},
			},
			GPUSharing: &v1alpha1.GPUSharingPolicy{
				ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing, v1alpha1.SharingMPS},
			},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
				TEETypes:            []v1alpha1.TEEType{v1alpha1.TEESEVSNP, v1alpha1.TEETDX},
				GPUCCMode:           v1alpha1.CCModeOn,
				AllowedMeasurements: []v1alpha1.Measurement{measurement},
				RequireAttestation:  true,
			},
		}},
		Nodes: make([]wire.Node, nodes),
	}
	observed := metav1.NewTime(now.Add(-time.Minute).Truncate(time.Second))
	for i := range req.Nodes {
		name := fmt.Sprintf("gpu-node-%05d", i)
		uid := types.UID(fmt.Sprintf("6c1f0f4e-0000-4000-8000-%012d", i))
		mode := v1alpha1.SharingExclusive
		if i%4 == 3 {
			mode = v1alpha1.SharingTimeSlicing
		}
		state := &v1alpha1.NodeSecurityStateSpec{
			NodeUID: uid, Incarnation: fmt.Sprintf("%s-boot-1", name), ObservedAt: observed,
			Source: v1alpha1.SourceAttested, Complete: true,
			Devices: make([]v1alpha1.GPUDevice, gpus),
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, Measurement: measurement,
				Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: observed, Verifier: "kbs.attest.svc"}},
		}
		for d := range state.Devices {
			state.Devices[d] = v1alpha1.GPUDevice{
				ID: fmt.Sprintf("GPU-%08x-%04d", i, d), Vendor: "nvidia", Model: "NVIDIA-H100-80GB-HBM3",
				SharingMode: mode, CCMode: v1alpha1.CCModeOn,
			}
		}
		req.Nodes[i] = wire.Node{Name: name, UID: uid, Pool: "acme", State: state}
	}
	return req
}
