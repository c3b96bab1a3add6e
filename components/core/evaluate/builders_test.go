package evaluate

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// now is the evaluator's clock in every test.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

var (
	measurementA = v1alpha1.Measurement("sha256:" + strings.Repeat("a", 64))
	measurementB = v1alpha1.Measurement("sha384:" + strings.Repeat("b", 96))
)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// strictPolicy exercises every rule: a compliantState passes it.
func strictPolicy(mutate ...func(*v1alpha1.PlacementPolicySpec)) *wire.Policy {
	p := &wire.Policy{Name: "strict", Spec: v1alpha1.PlacementPolicySpec{
		Confinement: v1alpha1.ConfinementPool,
		Evidence: v1alpha1.EvidencePolicy{
			AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD},
			MaxAge:          dur(10 * time.Minute),
		},
		GPUSharing: &v1alpha1.GPUSharingPolicy{
			ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing, v1alpha1.SharingMPS},
		},
		ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
			TEETypes:            []v1alpha1.TEEType{v1alpha1.TEESEVSNP, v1alpha1.TEETDX},
			GPUCCMode:           v1alpha1.CCModeOn,
			AllowedMeasurements: []v1alpha1.Measurement{measurementA},
			RequireAttestation:  true,
			MaxAttestationAge:   dur(time.Hour),
		},
	}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

// compliantState satisfies strictPolicy at now.
func compliantState(mutate ...func(*v1alpha1.NodeSecurityStateSpec)) *v1alpha1.NodeSecurityStateSpec {
	s := &v1alpha1.NodeSecurityStateSpec{
		NodeUID:     "uid-1",
		Incarnation: "inc-1",
		ObservedAt:  ago(time.Minute),
		Source:      v1alpha1.SourceNFD,
		Complete:    true,
		Devices: []v1alpha1.GPUDevice{
			{ID: "gpu-0", Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingExclusive, CCMode: v1alpha1.CCModeOn},
			{ID: "gpu-1", Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingExclusive, CCMode: v1alpha1.CCModeOn},
		},
		TEE: &v1alpha1.TEEFacts{
			Type:        v1alpha1.TEESEVSNP,
			Measurement: measurementA,
			Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: ago(5 * time.Minute), Verifier: "kbs"},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// allDevices changes every device of a state alike.
func allDevices(f func(*v1alpha1.GPUDevice)) func(*v1alpha1.NodeSecurityStateSpec) {
	return func(s *v1alpha1.NodeSecurityStateSpec) {
		for i := range s.Devices {
			f(&s.Devices[i])
		}
	}
}

func poolNode(state *v1alpha1.NodeSecurityStateSpec) wire.Node {
	return wire.Node{Name: "node-1", UID: "uid-1", Pool: "acme", State: state}
}

func request(node wire.Node) *wire.EvaluateRequest {
	return &wire.EvaluateRequest{
		Pod:    wire.Pod{Namespace: "acme-ml", Name: "train-0"},
		Tenant: &wire.Tenant{ID: "acme"},
		Policy: strictPolicy(),
		Nodes:  []wire.Node{node},
	}
}

func newEvaluator(profile guard.Profile) *Evaluator {
	e, err := New(Options{Profile: profile, Clock: fixedClock(now)})
	if err != nil {
		panic(err)
	}
	return e
}
