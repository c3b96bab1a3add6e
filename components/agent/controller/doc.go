// Package controller is the agent's reconcile loop. It watches Pods,
// Namespaces, NetworkPolicies and Services through shared informers, and on
// every relevant change (coalesced) compiles the policy of the node's own
// pods, finds each pod's host-side interface from the node's routes, and
// hands both to the enforcer, which switches only what changed. A pod
// interface whose pod it cannot name yet (the address is not in the API)
// is held meanwhile at the rules of the pods it may belong to (held.go).
// It reports what happened as metrics, JSON logs and, for a pod that falls
// back to deny-all, a Warning Event on the pod.
package controller
