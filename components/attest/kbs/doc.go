// Package kbs is the key broker: it releases a tenant's keys to the
// tenant's pods, and only while the node a pod runs on is the node it was
// bound to and that node's attested evidence satisfies the tenant's
// policy.
//
// The protocol follows the Confidential Containers KBS attestation
// protocol (Request, Challenge, Attestation, Response) where it fits:
//
//	POST /kbs/v0/auth                               {version, tee, extra-params} → {nonce, extra-params}, cookie kbs-session-id
//	POST /kbs/v0/attest                             {runtime-data: {nonce, tee-pubkey}, tee-evidence: {token}} → 204
//	GET  /kbs/v0/resource/<repository>/<type>/<tag> → the key, as a JWE in flattened JSON encrypted to tee-pubkey
//
// The evidence is not a hardware report of the pod: the node's TEE is
// attested by the attestation controller (the background check of RFC
// 9334), and the pod proves who it is and where it runs with its projected
// service-account token (audience xila-guard-kbs), which the broker
// verifies with a TokenReview. Every resource request judges again, from
// the API server: the pod still runs on that node, from the address the
// request comes from; the node's evidence is attested, has the node UID
// and incarnation the pod was bound against (the pod's
// guard.xila.us/bound-evidence annotation) and satisfies the tenant's
// PlacementPolicy; a KeyReleasePolicy of the tenant lists the resource.
// Any failure refuses with a reason code, and every decision is recorded
// as an Event on the pod and a JSON line.
package kbs
