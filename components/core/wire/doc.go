// Package wire defines the evaluator's HTTP contract, version v1alpha1:
// the JSON bodies of POST /v1alpha1/evaluate and how a server decodes and
// validates them.
//
// One EvaluateRequest carries one pod, its resolved tenant and policy, and
// any number of candidate nodes with their evidence. The EvaluateResponse
// carries a node-independent verdict for the pod and exactly one NodeResult
// per requested node, in request order. The evaluator is stateless: the
// request carries everything it needs.
//
// Callers should use package client, which treats every failure as a
// refusal; this package only describes the bytes.
package wire
