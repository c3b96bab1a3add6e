// Package reference decides whether one connection is allowed by reading the
// NetworkPolicy objects directly, the slow and obvious way, as the
// Kubernetes documentation states the rules.
//
// It shares no code with the compiler on purpose: it is the oracle the
// compiler is fuzzed against, and the truth table that conformance tests
// compare live probes with.
package reference
