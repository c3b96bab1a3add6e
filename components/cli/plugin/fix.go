package plugin

import (
	"slices"
	"strings"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// fixes says, per reason code, what would change a decision. %p stands for
// the policy's name and %n for the node's pool.
var fixes = map[guard.Reason]string{
	guard.ReasonTenantUnresolved:      "list the namespace in exactly one TenantBinding, and label it " + guard.LabelTenant + "=<that tenant> or not at all",
	guard.ReasonNoPolicy:              "name an existing PlacementPolicy in the TenantBinding's effectivePolicyRef",
	guard.ReasonTenantMismatch:        "none on this node: it is in another tenant's pool (%n)",
	guard.ReasonOutsidePool:           "a pool administrator labels the node " + guard.LabelTenantPool + "=<the tenant's pool>, or policy %p allows confinement Any",
	guard.ReasonEvidenceMissing:       "publish the node's evidence: check the observe controller's evidence publisher, or the attestation controller for attested evidence",
	guard.ReasonEvidenceNodeMismatch:  "wait for the publisher to replace the evidence of the node's earlier incarnation; if it does not, check the publisher",
	guard.ReasonSourceNotAccepted:     "publish evidence from a source policy %p accepts (spec.evidence.acceptedSources), or accept this one; production never accepts mock",
	guard.ReasonEvidenceStale:         "check the evidence publisher (GPU feature discovery for nfd, the attestation controller for attested), or raise policy %p's spec.evidence.maxAge",
	guard.ReasonClockSkew:             "fix the clock of the node or of the evidence publisher",
	guard.ReasonEvidenceIncomplete:    "check the node's feature labels or attester: the publisher could not determine every fact",
	guard.ReasonMixedPool:             "configure every GPU of the node alike (sharing mode, MIG profile, CC mode)",
	guard.ReasonExclusiveForbidden:    "use a node whose GPUs are shared as policy %p requires, or allow Exclusive in its gpuSharing",
	guard.ReasonMIGForbidden:          "use a node without MIG, or allow MIG in policy %p's gpuSharing",
	guard.ReasonMPSForbidden:          "use a node without MPS sharing, or allow MPS in policy %p's gpuSharing",
	guard.ReasonTimeSlicingForbidden:  "use a node whose GPUs are not time-sliced (turn time-slicing off in the GPU operator's config), or allow TimeSlicing in policy %p's gpuSharing",
	guard.ReasonCCModeMismatch:        "set the GPUs' confidential-computing mode to the one policy %p requires, or change its requirement",
	guard.ReasonTEEMissing:            "use a node that runs in a TEE, or drop the TEE requirement of policy %p",
	guard.ReasonTEETypeNotAllowed:     "use a node whose TEE type policy %p lists, or add this type to it",
	guard.ReasonMeasurementNotAllowed: "boot the node with a launch measurement policy %p allows, or add the measurement to its reference values",
	guard.ReasonMeasurementExpired:    "boot a measurement whose reference value has not expired, or extend its notAfter in policy %p",
	guard.ReasonTCBOutOfDate:          "update the platform firmware to the TCB policy %p requires",
	guard.ReasonAttestationMissing:    "check the node's attester and the attestation controller: no verdict was recorded",
	guard.ReasonAttestationFailed:     "read the verdict's reason in the node's NodeSecurityState (spec.tee.attestation), fix the node, and let it attest again",
	guard.ReasonAttestationStale:      "check the attestation controller, or raise policy %p's attestation maxAge",
	guard.ReasonEvaluatorTimeout:      "check xila-guard-core: it did not answer in time",
	guard.ReasonEvaluatorUnavailable:  "check xila-guard-core: it could not be reached",
	guard.ReasonEvaluatorError:        "check xila-guard-core's logs: it answered with an error",
}

// Fix says what would change a decision with these reasons: one hint per
// reason that has one, in order; "" for an allow.
func Fix(reasons []guard.Reason, policy, pool string) string {
	var out []string
	for _, r := range reasons {
		hint, ok := fixes[r]
		if !ok {
			continue
		}
		if policy == "" {
			policy = "<policy>"
		}
		if pool == "" {
			pool = "none"
		}
		hint = strings.NewReplacer("%p", policy, "%n", pool).Replace(hint)
		if !slices.Contains(out, hint) {
			out = append(out, hint)
		}
	}
	return strings.Join(out, "; ")
}
