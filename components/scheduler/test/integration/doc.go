// Package integration runs xila-guard-scheduler in-process against a real
// kube-apiserver and etcd (KUBEBUILDER_ASSETS) with the guard CRDs
// installed, plain Node objects and no kubelet, and an evaluator that is
// either scripted (to inject faults) or the real xila-guard-core binary.
// The tests carry the integration build tag: make integration runs them.
package integration
