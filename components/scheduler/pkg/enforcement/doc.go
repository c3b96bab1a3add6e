// Package enforcement is the XilaGuardEnforcement scheduler plugin: the
// only way onto a protected pool node. It admits a tenant's pod onto a
// node only on an explicit allow from the evaluator, the library
// components/core/evaluate linked into the scheduler, and refuses on
// everything else — a deny, an indeterminate answer, an answer that does
// not match its request. It decides nothing about policy itself.
//
//   - PreFilter resolves the pod's tenant (TenantBinding, namespace label)
//     and policy (effectivePolicyRef, then the namespace annotation), and
//     has the evaluator judge every node of the tenant's pool, with the
//     evidence its informers hold and the GPUs the node offers pods
//     (guard.AllocatableGPUs of its status.allocatable), in one evaluation
//     per scheduling cycle.
//   - Filter looks the answers up: allow is Success, deny Unschedulable,
//     anything else UnschedulableAndUnresolvable, with the evaluator's
//     reason codes in the message. Other pools are closed, and pods that
//     are not protected never reach a pool node.
//   - Bind re-reads the node, its NodeSecurityState and the policy from
//     the API server and re-judges the chosen node; it refuses the bind on
//     anything but allow, or when the node's UID or evidence incarnation
//     changed since Filter, and binds the pod with the record of the
//     evidence it judged on the Binding (guard.AnnotationBoundEvidence).
//
// The plugin also replaces the TaintToleration filter, which the
// xila-guard-scheduler profile disables, so that the pool taint counts as
// tolerated by the pool's own tenant and nobody else (see taintStatus).
package enforcement
