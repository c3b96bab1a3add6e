// Package cluster is what the webhook knows about the cluster: informer
// caches of namespaces, TenantBindings, PlacementPolicies, nodes and the
// pods bound to nodes, and the tenant resolution the scheduler applies.
// Everything is watched, never polled; the webhook reports ready only once
// every cache has synced.
package cluster
