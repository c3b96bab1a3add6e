package teeresources

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Resource names, Intel's, in Intel's units.
const (
	// ResourceEPC is the SGX enclave page cache, in bytes, an extended
	// resource of the node's status.
	ResourceEPC corev1.ResourceName = "sgx.intel.com/epc"
	// ResourceEnclave is the right to open the SGX enclave device, one per
	// enclave-running container, from the device plugin.
	ResourceEnclave corev1.ResourceName = "sgx.intel.com/enclave"
)

// DefaultAcceptedSources are the evidence sources whose EPC size is
// advertised unless the operator says otherwise.
var DefaultAcceptedSources = []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}

// Qualify returns the EPC size in bytes the node may advertise from its
// evidence, or 0 and why not. The evidence qualifies when it exists, is
// not being deleted, names the node's UID, comes from an accepted source,
// states a positive whole number of bytes of EPC and, when it is attested,
// its attestation passed.
func Qualify(node *corev1.Node, nss *v1alpha1.NodeSecurityState, accepted []v1alpha1.EvidenceSource) (int64, string) {
	switch {
	case node == nil:
		return 0, "the node is unknown"
	case nss == nil:
		return 0, "the node has no NodeSecurityState"
	case !nss.DeletionTimestamp.IsZero():
		return 0, "the node's NodeSecurityState is being deleted"
	case nss.Spec.NodeUID != node.UID:
		return 0, fmt.Sprintf("the evidence names node UID %q, the node is %q", nss.Spec.NodeUID, node.UID)
	case !slices.Contains(accepted, nss.Spec.Source):
		return 0, fmt.Sprintf("evidence source %q is not accepted (--accepted-sources %v)", nss.Spec.Source, accepted)
	case nss.Spec.TEE == nil || nss.Spec.TEE.EPCSize == nil:
		return 0, "the evidence states no EPC size"
	}
	q := nss.Spec.TEE.EPCSize
	size := q.Value()
	switch {
	case q.Cmp(*resource.NewQuantity(size, resource.DecimalSI)) != 0:
		return 0, fmt.Sprintf("the EPC size %s is not a whole number of bytes within 64 bits", nss.Spec.TEE.EPCSize)
	case size <= 0:
		return 0, fmt.Sprintf("the EPC size %s is not positive", nss.Spec.TEE.EPCSize)
	}
	if nss.Spec.Source == v1alpha1.SourceAttested {
		a := nss.Spec.TEE.Attestation
		if a == nil || a.Verdict != v1alpha1.AttestationPassed {
			verdict := "none"
			if a != nil {
				verdict = string(a.Verdict)
				if a.Reason != "" {
					verdict += " (" + string(a.Reason) + ")"
				}
			}
			return 0, "the attestation did not pass: verdict " + verdict
		}
	}
	return size, ""
}
