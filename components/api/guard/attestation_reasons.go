package guard

// Reasons the attestation verifier (components/attest) gives when it
// refuses a node's evidence. The verifier also gives two evaluator codes
// with the meaning they have there: MEASUREMENT_NOT_ALLOWED, for a launch
// measurement that no reference value allows, and ATTESTATION_STALE, for
// evidence that answers a challenge older than the verifier accepts; and
// the evaluator gives two of these, TCB_OUT_OF_DATE and
// MEASUREMENT_EXPIRED, against a policy's reference values. Like
// the others, these codes never change meaning.
const (
	// ReasonQuoteInvalid: the report or quote cannot be relied on at all:
	// it is malformed, its signature or certificate chain does not verify
	// against a trusted root, a certificate has expired, or it carries bytes
	// that nothing authenticates.
	ReasonQuoteInvalid Reason = "QUOTE_INVALID"
	// ReasonNonceMismatch: the report data is not the nonce of the
	// challenge, so the evidence was not produced for this node, this
	// incarnation and this challenge; it may be a replay.
	ReasonNonceMismatch Reason = "NONCE_MISMATCH"
	// ReasonTCBOutOfDate: the platform's firmware TCB is below the minimum
	// the verifier requires, or the vendor's collateral does not rate it up
	// to date.
	ReasonTCBOutOfDate Reason = "TCB_OUT_OF_DATE"
	// ReasonDebugPolicy: the guest runs with debugging allowed, so the host
	// can read its memory.
	ReasonDebugPolicy Reason = "DEBUG_POLICY"
	// ReasonTestRootOfTrust: the evidence verifies only against the lab root
	// of trust, which the production profile does not accept.
	ReasonTestRootOfTrust Reason = "TEST_ROOT_OF_TRUST"
	// ReasonMeasurementExpired: the launch measurement matches only
	// reference values whose validity has ended.
	ReasonMeasurementExpired Reason = "MEASUREMENT_EXPIRED"
	// ReasonChipIDChanged: verified SEV-SNP evidence comes from another chip
	// than the first evidence verified for the same node UID. The
	// attestation controller gives it, after the verifier's checks: the node
	// may be relaying its challenges to another machine's TEE.
	ReasonChipIDChanged Reason = "CHIP_ID_CHANGED"
)

// AttestationReasons lists every reason an attestation refuses evidence
// with, in the order of the checks: the verifier's six above and the two
// evaluator codes it shares, then the attestation controller's chip check.
var AttestationReasons = []Reason{
	ReasonAttestationStale, ReasonQuoteInvalid, ReasonTestRootOfTrust, ReasonNonceMismatch,
	ReasonDebugPolicy, ReasonTCBOutOfDate, ReasonMeasurementNotAllowed, ReasonMeasurementExpired,
	ReasonChipIDChanged,
}
