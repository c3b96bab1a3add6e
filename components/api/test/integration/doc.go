// Package integration tests the generated CRDs against a real
// kube-apiserver and etcd started by envtest. The tests carry the
// "integration" build tag and need KUBEBUILDER_ASSETS to name a directory
// holding kube-apiserver, etcd and kubectl:
//
//	KUBEBUILDER_ASSETS=$PWD/_output/bin go test -tags integration ./components/api/test/integration/
//
// Without the assets they fail rather than skip, so that a CI run that
// silently tests nothing is impossible.
package integration
