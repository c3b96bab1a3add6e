// Package integration runs the observe controllers against a real
// kube-apiserver and etcd (envtest) with the Xila Guard CRDs installed.
package integration
