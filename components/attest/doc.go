// Package attest verifies the hardware evidence of confidential-computing
// nodes in the background-check model of RFC 9334: a node (the attester)
// answers a challenge with an AMD SEV-SNP report or an Intel TDX quote, and
// the verifier appraises it against trusted roots and reference values.
//
// The module's packages:
//
//   - nonce binds a challenge to a node UID and an evidence incarnation;
//   - evidence defines the wire formats and decodes them strictly;
//   - verify appraises evidence and gives a result or a reason code;
//   - labtee is a software TEE for lab clusters that signs real-format
//     SEV-SNP reports with a lab certificate chain;
//   - attester answers challenges on a node, from the kernel's
//     configfs-tsm interface or the lab TEE;
//   - controller challenges every node's attester and writes its
//     NodeSecurityState with source attested;
//   - app is the xila-guard-attest command (cmd/xila-guard-attest), whose
//     subcommands are the controller and the attester.
//
// docs/attest.md describes the verifier, its profiles and its reason
// codes, the attester's protocol and the controller.
package attest
