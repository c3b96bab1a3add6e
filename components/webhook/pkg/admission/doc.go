// Package admission judges AdmissionReview v1 requests for pods, their
// ephemeralcontainers and binding subresources, and nodes. It is a pure
// decision layer: what it knows about the cluster comes through the Cluster
// interface and evaluator answers through the Evaluator interface, so the
// rules are tested with fakes and served unchanged by the real informers.
//
// Every path fails closed: a request that cannot be decoded, judged or
// checked with the evaluator is refused with a reason code.
package admission
