// Package postbind evaluates every bound, protected pod against its node,
// whoever scheduled it, and reports what the evaluator does not allow: an
// Event on the pod and one JSON line per finding. When a decision changes —
// because the node's evidence, the node or the tenant's policy changed — it
// writes a drift record. It only reports; it never evicts or cordons.
package postbind
