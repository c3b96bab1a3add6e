// Package integration runs xila-guard-scheduler in-process, with the
// evaluator linked in as in the binary, against a real kube-apiserver and
// etcd (KUBEBUILDER_ASSETS) with the guard CRDs installed, plain Node
// objects and no kubelet. The tests carry the integration build tag: make
// integration runs them.
package integration
