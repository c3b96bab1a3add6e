// Package labtee is a software TEE for lab clusters: it signs SEV-SNP
// attestation reports in the real format, with a lab certificate chain
// built like AMD's (ARK → ASK → VCEK), so that evidence goes through the
// real verification on machines without SEV-SNP.
//
// Generate a chain once and keep it in a Kubernetes Secret (SecretData;
// ParseSecretData and ReadSecretDir read it back). The verifier trusts its
// root only under the lab profile; under the production profile, evidence
// signed by it is refused with TEST_ROOT_OF_TRUST. Nothing signed here
// proves isolation: whoever reads the Secret can sign any report.
package labtee
