// Package integration runs the attestation controller against a real
// kube-apiserver and etcd (envtest) with the Xila Guard CRDs installed, and
// lab attesters served in-process.
package integration
