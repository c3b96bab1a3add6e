package teeresources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

const testEPC = 64 << 20

func testNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tee-1", UID: "uid-1"}}
}

// state is attested evidence of tee-1 that passed and states testEPC,
// changed by mutate.
func state(mutate func(*v1alpha1.NodeSecurityStateSpec)) *v1alpha1.NodeSecurityState {
	q := resource.MustParse("64Mi")
	nss := &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "tee-1"}, Spec: v1alpha1.NodeSecurityStateSpec{
		NodeUID: "uid-1", Incarnation: "inc", ObservedAt: metav1.Now(), Source: v1alpha1.SourceAttested, Complete: true,
		TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, EPCSize: &q,
			Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, RootOfTrust: v1alpha1.RootLab}},
	}}
	if mutate != nil {
		mutate(&nss.Spec)
	}
	return nss
}

func epc(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestQualify(t *testing.T) {
	attestedAndNFD := []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD}
	deleting := state(nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
	for _, tc := range []struct {
		name     string
		node     *corev1.Node
		nss      *v1alpha1.NodeSecurityState
		accepted []v1alpha1.EvidenceSource
		want     int64
		why      string
	}{
		{name: "attested, passed", nss: state(nil), want: testEPC},
		{name: "plain bytes", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = epc("67108864") }), want: testEPC},
		{name: "no node", node: nil, nss: state(nil), why: "the node is unknown"},
		{name: "no evidence", why: "no NodeSecurityState"},
		{name: "evidence being deleted", nss: deleting, why: "being deleted"},
		{name: "another node's evidence", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "uid-0" }), why: `names node UID "uid-0"`},
		{name: "attestation failed", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Attestation = &v1alpha1.Attestation{Verdict: v1alpha1.AttestationFailed, Reason: guard.ReasonMeasurementNotAllowed}
		}), why: "verdict Failed (MEASUREMENT_NOT_ALLOWED)"},
		{name: "attested without a verdict", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation = nil }), why: "verdict none"},
		{name: "no TEE", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE = nil }), why: "states no EPC size"},
		{name: "no EPC size", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = nil }), why: "states no EPC size"},
		{name: "zero EPC size", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = epc("0") }), why: "is not positive"},
		{name: "negative EPC size", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = epc("-64Mi") }), why: "is not positive"},
		{name: "a fraction of a byte", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = epc("1500m") }), why: "not a whole number"},
		{name: "beyond 64 bits", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.EPCSize = epc("100E") }), why: "not a whole number"},
		{name: "nfd not accepted by default", nss: state(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.Source, s.TEE.Attestation = v1alpha1.SourceNFD, nil
		}), why: `source "nfd" is not accepted`},
		{name: "nfd accepted needs no verdict", accepted: attestedAndNFD, nss: state(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.Source, s.TEE.Attestation = v1alpha1.SourceNFD, nil
		}), want: testEPC},
		{name: "mock not accepted", accepted: attestedAndNFD, nss: state(func(s *v1alpha1.NodeSecurityStateSpec) { s.Source = v1alpha1.SourceMock }),
			why: `source "mock" is not accepted`},
		{name: "only nfd accepted", accepted: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}, nss: state(nil), why: `source "attested" is not accepted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode()
			if tc.name == "no node" {
				node = nil
			}
			accepted := tc.accepted
			if accepted == nil {
				accepted = DefaultAcceptedSources
			}
			got, why := Qualify(node, tc.nss, accepted)
			if got != tc.want || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("Qualify = %d, %q; want %d, %q", got, why, tc.want, tc.why)
			}
		})
	}
}
