package wire

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Version is the version of this contract; it is part of EvaluatePath.
const Version = "v1alpha1"

// EvaluatePath is the endpoint that takes an EvaluateRequest.
const EvaluatePath = guard.EvaluatePath

// ContentType is the media type of every request and response body.
const ContentType = "application/json"

// EvaluateRequest asks for a decision about one pod on each of its
// candidate nodes.
type EvaluateRequest struct {
	// Profile asks for an evaluator profile. The evaluator applies the
	// stricter of this and its own, so a caller can ask for production on a
	// lab evaluator but never the reverse. Empty means the evaluator's own.
	Profile guard.Profile `json:"profile,omitempty"`
	// Pod identifies the pod being placed; it is used in messages.
	Pod Pod `json:"pod"`
	// Tenant is the pod's resolved tenant; nil when it could not be
	// resolved (TENANT_UNRESOLVED).
	Tenant *Tenant `json:"tenant,omitempty"`
	// Policy is the tenant's resolved policy; nil when none applies
	// (NO_POLICY).
	Policy *Policy `json:"policy,omitempty"`
	// Nodes are the candidate nodes; each name at most once. Empty asks
	// only for the pod's node-independent verdict.
	Nodes []Node `json:"nodes"`
	// DevicesByClaim says that the pod takes GPUs only through DRA claims
	// (it requests no GPU resource), whose devices are judged one by one
	// where they are allocated: the node's own judgement then leaves out
	// the devices its evidence names for DRA (devices[].dra), and the
	// policy's GPU rules need no device to judge on the node.
	DevicesByClaim bool `json:"devicesByClaim,omitempty"`
}

// Pod identifies a pod.
type Pod struct {
	// Namespace of the pod.
	Namespace string `json:"namespace"`
	// Name of the pod; may be empty for a pod that is being created with
	// generateName.
	Name string `json:"name,omitempty"`
	// UID of the pod, when known.
	UID types.UID `json:"uid,omitempty"`
}

// Tenant is a resolved tenant.
type Tenant struct {
	// ID is the tenant's ID (TenantBinding.spec.tenantId).
	ID string `json:"id"`
	// Pool is the value of the pool label on the tenant's nodes; empty
	// means the same as ID.
	Pool string `json:"pool,omitempty"`
}

// PoolName returns the tenant's pool label value.
func (t *Tenant) PoolName() string {
	if t.Pool != "" {
		return t.Pool
	}
	return t.ID
}

// Policy is a resolved PlacementPolicy.
type Policy struct {
	// Name of the PlacementPolicy, for messages.
	Name string `json:"name"`
	// Spec of the PlacementPolicy.
	Spec v1alpha1.PlacementPolicySpec `json:"spec"`
}

// Node is one candidate node and its evidence.
type Node struct {
	// Name of the node.
	Name string `json:"name"`
	// UID of the Node object. When set, evidence that names another UID is
	// not used (EVIDENCE_NODE_MISMATCH).
	UID types.UID `json:"uid,omitempty"`
	// Pool is the value of the node's guard.xila.us/tenant-pool label;
	// empty when the node is in no pool.
	Pool string `json:"pool,omitempty"`
	// AllocatableGPUs is how many GPUs the node offers pods: the sum of
	// its status.allocatable of GPU resources (guard.AllocatableGPUs). The
	// evaluator checks it against the devices in the evidence; nil when
	// the caller does not know, which skips that check.
	AllocatableGPUs *int64 `json:"allocatableGPUs,omitempty"`
	// AllocatableSharedGPUs is how many of those are replicas of a shared
	// GPU or slice: the sum of its status.allocatable of replica resources
	// (guard.AllocatableSharedGPUs, e.g. nvidia.com/gpu.shared). A replica
	// means shared, whatever the evidence says: evidence that describes
	// no device as time-sliced or MPS-shared does not account for them.
	// Nil or 0 when there are none.
	AllocatableSharedGPUs *int64 `json:"allocatableSharedGPUs,omitempty"`
	// State is the spec of the node's NodeSecurityState; nil when the node
	// has none (EVIDENCE_MISSING).
	State *v1alpha1.NodeSecurityStateSpec `json:"state,omitempty"`
}

// EvaluateResponse answers an EvaluateRequest.
type EvaluateResponse struct {
	// Profile is the profile that was applied.
	Profile guard.Profile `json:"profile"`
	// EvaluatedAt is the evaluator's clock when it decided.
	EvaluatedAt metav1.Time `json:"evaluatedAt"`
	// Pod is the node-independent verdict: allow once the tenant and the
	// policy are resolved. A refusal here is repeated in every NodeResult.
	Pod Verdict `json:"pod"`
	// Results holds one result per requested node, in request order.
	Results []NodeResult `json:"results"`
}

// Verdict is a decision with its reasons.
type Verdict struct {
	// Decision is allow, deny or indeterminate.
	Decision guard.Decision `json:"decision"`
	// Reasons explain the decision, most fundamental first. For an allow
	// they are notes, such as SIMULATED_EVIDENCE.
	Reasons []guard.Reason `json:"reasons"`
	// Message explains the decision to a person.
	Message string `json:"message"`
}

// NodeResult is the decision about the pod on one node.
type NodeResult struct {
	// Node is the node's name, as in the request.
	Node string `json:"node"`
	// Decision is allow, deny or indeterminate. Only allow admits.
	Decision guard.Decision `json:"decision"`
	// Reasons explain the decision, in a stable order.
	Reasons []guard.Reason `json:"reasons"`
	// Message explains the decision to a person; callers use it verbatim.
	Message string `json:"message"`
	// Incarnation is the incarnation of the evidence that was judged, when
	// there was evidence; callers compare it before acting on the result.
	Incarnation string `json:"incarnation,omitempty"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	// Message summarises the problem, e.g.
	// "nodes[3].state.observedAt: Required value".
	Message string `json:"message"`
	// Errors lists the problems field by field, when the request was
	// malformed.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is a problem with one field of a request.
type FieldError struct {
	// Field is the path of the field, e.g. nodes[3].state.observedAt.
	Field string `json:"field"`
	// Detail says what is wrong with it.
	Detail string `json:"detail"`
}
