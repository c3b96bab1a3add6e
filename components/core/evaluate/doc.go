// Package evaluate is the Xila Guard evaluator: a pure, deterministic
// function from one pod, its tenant and policy, the profile and N candidate
// nodes with their evidence, to one decision per node.
//
// The rules run in a fixed order, and each stage stops the evaluation of a
// node when it fails, because later stages would judge facts that cannot be
// relied on:
//
//  1. the request: a tenant and a policy must be resolved
//     (TENANT_UNRESOLVED, NO_POLICY: indeterminate);
//  2. placement: the node must be in the tenant's pool (TENANT_MISMATCH,
//     OUTSIDE_POOL: deny), unless the policy's confinement is Any and the
//     node is in no pool at all (allow, UNGUARDED_NODE);
//  3. admissibility: the evidence must exist, describe this node, come from
//     an accepted source, be fresh and complete (indeterminate). Complete
//     includes accounting for the GPUs: the devices it lists must match
//     the node's allocatable GPUs when the caller passes them, and a policy
//     with GPU rules needs at least one device to judge
//     (EVIDENCE_INCOMPLETE);
//  4. consistency: the node's devices must agree (MIXED_POOL: indeterminate);
//  5. content: sharing modes, CC mode, TEE type, launch measurement and
//     attestation. Every content rule runs; a violation denies, and a
//     missing or stale attestation is indeterminate. MIG and the sharing
//     of a device or its MIG slices are judged as separate modes.
//
// Only a node that passes every stage is allowed. The same input and clock
// always give the same output, reasons included.
package evaluate
