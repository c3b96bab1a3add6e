package guard

// Reasons the key broker (components/attest/kbs) refuses a key with. The
// broker also gives the evaluator's codes, with their meaning there, when
// the node's evidence does not satisfy the tenant's policy, and the caller
// code NODE_CHANGED when the node or its evidence incarnation is not the
// one the pod was bound against. Like the others, these codes never change
// meaning.
const (
	// ReasonSessionInvalid: the request names no session, an unknown or
	// expired one, or one that has not attested.
	ReasonSessionInvalid Reason = "SESSION_INVALID"
	// ReasonTokenInvalid: the service-account token does not authenticate
	// for the key broker's audience, or is not bound to a pod and a node.
	ReasonTokenInvalid Reason = "TOKEN_INVALID"
	// ReasonPodMismatch: the token's pod no longer exists (or is another
	// pod of the same name), has finished, or is not bound to the node the
	// token names.
	ReasonPodMismatch Reason = "POD_MISMATCH"
	// ReasonPeerMismatch: the request does not come from the token's pod:
	// its source address is not one of the pod's IPs.
	ReasonPeerMismatch Reason = "PEER_MISMATCH"
	// ReasonBindingUnrecorded: the pod carries no record of the evidence
	// it was bound against (the guard.xila.us/bound-evidence annotation),
	// so nothing shows that its node was judged when it was placed.
	ReasonBindingUnrecorded Reason = "BINDING_UNRECORDED"
	// ReasonEvidenceNotAttested: the node's evidence is not attested: keys
	// are released only on a verified hardware report.
	ReasonEvidenceNotAttested Reason = "EVIDENCE_NOT_ATTESTED"
	// ReasonKeyNotOwned: no KeyReleasePolicy of the pod's tenant lists the
	// requested resource.
	ReasonKeyNotOwned Reason = "KEY_NOT_OWNED"
	// ReasonKeyUnavailable: the key store has no such key, or could not be
	// read.
	ReasonKeyUnavailable Reason = "KEY_UNAVAILABLE"
	// ReasonPublicKeyInvalid: the tee-pubkey is not a public key the broker
	// can encrypt to.
	ReasonPublicKeyInvalid Reason = "PUBKEY_INVALID"
)

// KeyReasons lists the key broker's own reasons, in the order of its
// checks. None of them is among Reasons, CallerReasons, AdmissionReasons
// or AttestationReasons.
var KeyReasons = []Reason{
	ReasonSessionInvalid, ReasonPublicKeyInvalid, ReasonTokenInvalid, ReasonPodMismatch, ReasonPeerMismatch,
	ReasonBindingUnrecorded, ReasonEvidenceNotAttested, ReasonKeyNotOwned, ReasonKeyUnavailable,
}
