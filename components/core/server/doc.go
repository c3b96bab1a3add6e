// Package server is the HTTP face of the evaluator: POST /v1alpha1/evaluate,
// the health and readiness probes, and Prometheus metrics.
package server
