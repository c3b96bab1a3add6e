// Package controller is the attestation controller: for every node that
// runs an attester, it challenges the attester with a fresh nonce bound to
// the node's UID and incarnation, verifies the evidence, and writes the
// node's NodeSecurityState with source attested, every TEE fact taken from
// the verified evidence.
//
// Reconciler challenges a node when its evidence is missing, comes from
// another source, names another node UID or incarnation, or is older than
// the refresh interval; an attester that does not answer leaves the
// evidence as it was, to grow stale. Reconciler.Challenge challenges one
// node at once and returns when the fresh state is written, and
// ChallengeHandler serves it over HTTP for the scheduler's re-challenge.
//
// The incarnation of attested evidence (Incarnation) changes when the
// node is re-provisioned (its UID), rebooted (its boot ID) or its attester
// pod is replaced: each is another evidence source for the same name.
//
// The controller also binds each node UID to the SEV-SNP chip of the
// first evidence it verifies for it, and refuses evidence from another
// chip (CHIP_ID_CHANGED): a node that relays its challenges to another
// machine's TEE cannot pass as that machine once it has been attested on
// its own.
package controller
