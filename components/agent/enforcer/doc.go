// Package enforcer keeps the dataplane in step with the compiled policy of
// the node's pods. Each Sync applies what changed, removes interfaces whose
// pods are gone, refreshes the Service frontends, and returns one Outcome
// per pod for the agent's metrics, logs and Events.
//
// It holds no cluster client: the agent of issue 8 feeds it from informers
// (pods of this node with their host-side interfaces, and a compiler run
// over the cluster snapshot).
package enforcer
