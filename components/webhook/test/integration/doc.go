// Package integration runs xila-guard-webhook against a real kube-apiserver
// and etcd (envtest assets, KUBEBUILDER_ASSETS) and the real evaluator: the
// API server calls the webhook through ValidatingWebhookConfigurations with
// failurePolicy Fail, and the tests make real requests. Run with
// `make integration` (build tag integration).
package integration
