// Package core is the Xila Guard evaluator: a pure, deterministic library that
// decides whether a pod may run on each candidate node, and the
// xila-guard-core HTTP server that exposes it.
package core
