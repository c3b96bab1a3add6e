// Package nonce binds attestation evidence to one node, one incarnation of
// its evidence and one challenge.
//
// A node is challenged with a fresh random value (NewChallenge) and answers
// with a report whose report data is For(node UID, incarnation, challenge);
// the verifier expects exactly that value back. A report made for
// another node, for an earlier incarnation of this one, or for an earlier
// challenge carries another nonce and is refused as a replay
// (NONCE_MISMATCH). The nonce fills the 64 bytes of report data that both
// SEV-SNP (REPORT_DATA) and TDX (REPORTDATA) sign.
package nonce
