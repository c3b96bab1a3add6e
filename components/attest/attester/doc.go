// Package attester is the node side of attestation: an HTTP server that
// answers a challenge with evidence from the node's TEE, the backends that
// produce the evidence, and the client with which the attestation
// controller asks for it.
//
// The protocol is one call. The controller POSTs a Request to Path with the
// node's UID, its evidence incarnation and a fresh challenge (or the 64
// bytes of report data they hash to, nonce.For); the attester answers with
// a Response: the TEE type and the evidence, whose report data is that
// nonce. Nothing the attester says is trusted: the controller verifies the
// evidence, and evidence that does not carry the nonce it computed itself
// fails (NONCE_MISMATCH).
//
// Two backends implement Backend: TSM asks the kernel's configfs-tsm report
// interface (/sys/kernel/config/tsm/report) for an SEV-SNP report or a TDX
// quote, and Lab signs real-format SEV-SNP reports with a lab chain
// (package labtee), for lab clusters without confidential hardware.
package attester
