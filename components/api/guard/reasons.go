package guard

// Reason is a stable, upper-snake code that explains an evaluator decision.
// Reasons appear in scheduler events, admission messages, logs and metrics;
// operators match on them, so a code never changes meaning once released.
type Reason string

// Reasons about the request as a whole; every node gets them.
const (
	// ReasonTenantUnresolved: the pod's tenant could not be determined.
	ReasonTenantUnresolved Reason = "TENANT_UNRESOLVED"
	// ReasonNoPolicy: no PlacementPolicy applies to the pod's tenant.
	ReasonNoPolicy Reason = "NO_POLICY"
)

// Reasons about where the node sits.
const (
	// ReasonTenantMismatch: the node belongs to another tenant's pool.
	ReasonTenantMismatch Reason = "TENANT_MISMATCH"
	// ReasonOutsidePool: the node is in no pool and the policy confines the
	// tenant to its pool.
	ReasonOutsidePool Reason = "OUTSIDE_POOL"
	// ReasonUnguardedNode accompanies an allow: the node is in no pool and
	// the policy's confinement is Any, so its evidence is not checked.
	ReasonUnguardedNode Reason = "UNGUARDED_NODE"
)

// Reasons about whether the node's evidence can be relied on at all. Each
// makes the decision indeterminate.
const (
	// ReasonEvidenceMissing: the node has no NodeSecurityState.
	ReasonEvidenceMissing Reason = "EVIDENCE_MISSING"
	// ReasonEvidenceNodeMismatch: the evidence names another node UID, so
	// it describes an earlier incarnation of a node with the same name.
	ReasonEvidenceNodeMismatch Reason = "EVIDENCE_NODE_MISMATCH"
	// ReasonSourceNotAccepted: neither the policy nor the profile accepts
	// the evidence source (production never accepts mock).
	ReasonSourceNotAccepted Reason = "SOURCE_NOT_ACCEPTED"
	// ReasonEvidenceStale: the evidence is older than the policy allows.
	ReasonEvidenceStale Reason = "EVIDENCE_STALE"
	// ReasonClockSkew: a timestamp in the evidence lies in the future beyond
	// the tolerated clock skew.
	ReasonClockSkew Reason = "CLOCK_SKEW"
	// ReasonEvidenceIncomplete: the publisher marked the evidence incomplete,
	// or a fact the policy needs is absent.
	ReasonEvidenceIncomplete Reason = "EVIDENCE_INCOMPLETE"
	// ReasonMixedPool: the node's devices disagree on sharing mode, MIG
	// profile or CC mode, so the device a pod would get cannot be judged.
	ReasonMixedPool Reason = "MIXED_POOL"
)

// Reasons about what the evidence shows.
const (
	// ReasonExclusiveForbidden: a device is exclusive and the policy does
	// not allow that mode.
	ReasonExclusiveForbidden Reason = "EXCLUSIVE_FORBIDDEN"
	// ReasonMIGForbidden: a device is MIG-partitioned against the policy.
	ReasonMIGForbidden Reason = "MIG_FORBIDDEN"
	// ReasonMPSForbidden: a device is shared through MPS against the policy.
	ReasonMPSForbidden Reason = "MPS_FORBIDDEN"
	// ReasonTimeSlicingForbidden: a device is time-sliced against the policy.
	ReasonTimeSlicingForbidden Reason = "TIME_SLICING_FORBIDDEN"
	// ReasonCCModeMismatch: a device's confidential-computing mode differs
	// from the one the policy requires.
	ReasonCCModeMismatch Reason = "CC_MODE_MISMATCH"
	// ReasonTEEMissing: the policy requires a TEE and the node has none.
	ReasonTEEMissing Reason = "TEE_MISSING"
	// ReasonTEETypeNotAllowed: the node's TEE type is not in the policy.
	ReasonTEETypeNotAllowed Reason = "TEE_TYPE_NOT_ALLOWED"
	// ReasonMeasurementNotAllowed: the launch measurement is not in the
	// policy's allow-list.
	ReasonMeasurementNotAllowed Reason = "MEASUREMENT_NOT_ALLOWED"
	// ReasonAttestationMissing: the policy requires attestation and the
	// evidence has no verdict; indeterminate.
	ReasonAttestationMissing Reason = "ATTESTATION_MISSING"
	// ReasonAttestationFailed: the attestation verdict is Failed.
	ReasonAttestationFailed Reason = "ATTESTATION_FAILED"
	// ReasonAttestationStale: the verdict is older than the policy allows;
	// indeterminate.
	ReasonAttestationStale Reason = "ATTESTATION_STALE"
	// ReasonSimulatedEvidence accompanies an allow under the lab profile
	// that rests on mock evidence: simulated integration, not isolation.
	ReasonSimulatedEvidence Reason = "SIMULATED_EVIDENCE"
)

// Reasons lists every reason code in the order the evaluator reports them.
// MEASUREMENT_EXPIRED and TCB_OUT_OF_DATE are the attestation verifier's
// codes too (attestation_reasons.go), with the same meaning against a
// policy's reference values.
var Reasons = []Reason{
	ReasonTenantUnresolved, ReasonNoPolicy,
	ReasonTenantMismatch, ReasonOutsidePool, ReasonUnguardedNode,
	ReasonEvidenceMissing, ReasonEvidenceNodeMismatch, ReasonSourceNotAccepted,
	ReasonEvidenceStale, ReasonClockSkew, ReasonEvidenceIncomplete, ReasonMixedPool,
	ReasonExclusiveForbidden, ReasonMIGForbidden, ReasonMPSForbidden, ReasonTimeSlicingForbidden,
	ReasonCCModeMismatch, ReasonTEEMissing, ReasonTEETypeNotAllowed, ReasonMeasurementNotAllowed,
	ReasonMeasurementExpired, ReasonTCBOutOfDate, ReasonAttestationMissing, ReasonAttestationFailed, ReasonAttestationStale,
	ReasonSimulatedEvidence,
}

// IsKnown reports whether r is one of Reasons.
func (r Reason) IsKnown() bool {
	for _, known := range Reasons {
		if r == known {
			return true
		}
	}
	return false
}
