// Package status keeps the status of the Xila Guard objects: the Ready
// condition and binding count of each PlacementPolicy; the Ready
// condition, resolved namespaces, policy and pool nodes of each
// TenantBinding; and the Ready condition (fresh, complete evidence of the
// node it names) and evaluation of each NodeSecurityState.
//
// Tenants and policies are resolved with the rules every component shares
// (package resolve), and a node is judged by the observe controller's own
// evaluator, as the compliance labeller judges it. The status is a report
// for people and tools: no decision reads it, and a status that could not
// be brought up to date only lags.
//
// Each reconcile computes the whole status from the cache and writes it,
// through the status subresource, only when it differs from what is
// stored: a resync that finds nothing new writes nothing, and a
// NodeSecurityState whose evidence is only confirmed again (a newer
// observedAt and generation, the same judgement) is not rewritten.
package status
