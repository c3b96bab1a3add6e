// Package compiler turns Kubernetes NetworkPolicy into per-pod, per-direction
// rule sets (package rules) that the dataplane loads into eBPF maps.
//
// The input is plain Go values — pods, namespaces, services and
// networking.k8s.io/v1 NetworkPolicies — so the same code serves the agent's
// informer caches and tests without a cluster. Every Kubernetes semantic is
// kept: all selecting policies are unioned; pod and namespace selectors
// select pods, together their intersection; ipBlock except is subtracted
// exactly; numeric ports, endPort ranges and named ports (egress: per
// destination pod; ingress: the protected pod's own containers); an empty
// from/to is every address; SCTP, UDP and TCP are kept apart.
//
// A policy the compiler cannot translate, or a result over a capacity limit,
// makes every pod it touches deny-all and carries an error: the result is
// never wider than Kubernetes says, and no rule is dropped silently.
package compiler
