// Package enforcer keeps the dataplane in step with the compiled policy of
// the node's pods. Each Sync applies what changed in one batch (interfaces
// not enforced yet first), holds the interfaces of pods not known yet at the
// rules it is given, removes interfaces that belong to neither, refreshes
// the Service frontends, and returns one Outcome per pod for the agent's
// metrics, logs and Events.
//
// It holds no cluster client: the agent's controller feeds it from
// informers (pods of this node with their host-side interfaces, and a
// compiler run over the cluster snapshot).
package enforcer
