// Package evidence defines the wire formats in which an attester sends its
// evidence, and decodes them strictly.
//
// SEV-SNP evidence is the 1184-byte attestation report followed by the
// certificate table of the GHCB specification (the GUID table that the
// guest's extended report request returns): a header of 24-byte entries
// ended by an all-zero entry, then the certificates. Only the VCEK, VLEK,
// ASK and ARK entries are allowed, each at most once, laid out back to back
// in header order with nothing after them. TDX evidence is a version 4
// quote exactly as the quoting enclave produced it, with its PCK
// certificate chain in canonical PEM.
//
// Decoding refuses every byte that verification would not authenticate or
// compare: padding, unknown entries, trailing data, PEM text outside the
// certificates. Encoding an accepted input gives the same bytes back, so a
// mutated input either fails to decode or differs in bytes the verifier
// checks.
package evidence
