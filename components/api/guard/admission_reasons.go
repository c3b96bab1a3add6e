package guard

// Reasons the admission webhook gives when it refuses a request on its own
// authority, without an evaluator decision. Together with the evaluator's
// TENANT_UNRESOLVED and NO_POLICY and the callers' EVALUATOR_* codes they
// are every code an admission refusal carries. Like the others, they never
// change meaning.
const (
	// ReasonSchedulerNotAllowed: a protected pod names a scheduler other than
	// xila-guard-scheduler or an accepted external one.
	ReasonSchedulerNotAllowed Reason = "SCHEDULER_NOT_ALLOWED"
	// ReasonNodeNameSet: a protected pod is created with spec.nodeName set,
	// which would bypass every scheduler.
	ReasonNodeNameSet Reason = "NODE_NAME_SET"
	// ReasonPrivilegedContainer: a container of a protected pod (including
	// init and ephemeral containers) is privileged.
	ReasonPrivilegedContainer Reason = "PRIVILEGED_CONTAINER"
	// ReasonHostNetwork: a protected pod uses the node's network namespace.
	ReasonHostNetwork Reason = "HOST_NETWORK"
	// ReasonHostPID: a protected pod uses the node's PID namespace.
	ReasonHostPID Reason = "HOST_PID"
	// ReasonHostIPC: a protected pod uses the node's IPC namespace.
	ReasonHostIPC Reason = "HOST_IPC"
	// ReasonHostPathVolume: a protected pod mounts a hostPath volume.
	ReasonHostPathVolume Reason = "HOST_PATH_VOLUME"
	// ReasonPodSecurityBaseline: a protected pod breaks a control of the
	// baseline Pod Security Standard (capabilities, seccomp, AppArmor,
	// SELinux, procMount, sysctls, host ports, ...), named in the message.
	ReasonPodSecurityBaseline Reason = "POD_SECURITY_BASELINE"
	// ReasonPodSecurityRestricted: a protected pod whose policy asks for the
	// restricted Pod Security Standard breaks one of its controls.
	ReasonPodSecurityRestricted Reason = "POD_SECURITY_RESTRICTED"
	// ReasonImageNotPinned: a container's image is named by tag, not by
	// digest, under a policy that allows image digests only.
	ReasonImageNotPinned Reason = "IMAGE_NOT_PINNED"
	// ReasonImageNotAllowed: a container's image digest is not in the
	// policy's allowedImageDigests.
	ReasonImageNotAllowed Reason = "IMAGE_NOT_ALLOWED"
	// ReasonForeignPool: a protected pod selects, requires or tolerates a
	// pool other than its tenant's (by label value, by a taint toleration of
	// another value, or by a wildcard).
	ReasonForeignPool Reason = "FOREIGN_POOL"
	// ReasonSchedulerProfileMismatch: a protected pod names an external
	// scheduler but does not match the workload selector of the
	// orchestrator profile that scheduler belongs to.
	ReasonSchedulerProfileMismatch Reason = "SCHEDULER_PROFILE_MISMATCH"
	// ReasonPoolToleration: a pod outside every tenant tolerates the pool
	// taint, by its key or by a wildcard toleration.
	ReasonPoolToleration Reason = "POOL_TOLERATION"
	// ReasonPoolSelector: a pod outside every tenant selects or requires the
	// pool label (nodeSelector or required node affinity).
	ReasonPoolSelector Reason = "POOL_SELECTOR"
	// ReasonPoolNodeName: a pod outside every tenant names a pool node, in
	// spec.nodeName or in a required node affinity on metadata.name.
	ReasonPoolNodeName Reason = "POOL_NODE_NAME"
	// ReasonNodeUnknown: a pod names a node, or is bound to one, that the
	// webhook does not know, so it cannot tell whether it is a pool node.
	ReasonNodeUnknown Reason = "NODE_UNKNOWN"
	// ReasonBindingNotAllowed: a user that is not an accepted scheduler
	// binds a protected pod, or binds a pod to a pool node.
	ReasonBindingNotAllowed Reason = "BINDING_NOT_ALLOWED"
	// ReasonPoolMembershipLocked: a node's pool label or pool taint is
	// changed or removed while tenant pods run on it.
	ReasonPoolMembershipLocked Reason = "POOL_MEMBERSHIP_LOCKED"
	// ReasonMigrationOutsidePool: a KubeVirt VirtualMachineInstanceMigration
	// in a protected namespace does not constrain its target to the
	// tenant's pool (spec.addedNodeSelector without the pool label, or with
	// another pool), or sends the VMI to another cluster (spec.sendTo).
	ReasonMigrationOutsidePool Reason = "MIGRATION_OUTSIDE_POOL"
	// ReasonPodAddressOutsideNode: a status write gives a protected pod an
	// address outside its node's pod ranges (spec.podCIDRs), such as
	// another node's pod's, which would make that pod an endpoint of the
	// tenant's Services.
	ReasonPodAddressOutsideNode Reason = "POD_ADDRESS_OUTSIDE_NODE"
	// ReasonBoundEvidenceReserved: a pod's AnnotationBoundEvidence is
	// added, changed or removed otherwise than on the controlled
	// scheduler's or a record binder's binding (at CREATE, UPDATE,
	// through pods/status, or another principal's binding). The API
	// server gives it, from the chart's admission policy
	// xila-guard-bound-evidence, not the webhook.
	ReasonBoundEvidenceReserved Reason = "BOUND_EVIDENCE_RESERVED"
	// ReasonUnexpectedRequest: the admission request is for a resource,
	// subresource, kind or operation the endpoint does not judge, or its
	// object cannot be decoded.
	ReasonUnexpectedRequest Reason = "UNEXPECTED_REQUEST"
	// ReasonLookupFailed: what the decision needs (a namespace, the
	// webhook's caches) could not be read, so nothing is allowed.
	ReasonLookupFailed Reason = "LOOKUP_FAILED"
)

// AdmissionReasons lists the webhook's own reasons and the bound-evidence
// policy's, in the order above, then DeviceReasons. None of them is among
// Reasons or CallerReasons.
var AdmissionReasons = append([]Reason{
	ReasonSchedulerNotAllowed, ReasonNodeNameSet, ReasonPrivilegedContainer,
	ReasonHostNetwork, ReasonHostPID, ReasonHostIPC, ReasonHostPathVolume,
	ReasonPodSecurityBaseline, ReasonPodSecurityRestricted, ReasonImageNotPinned, ReasonImageNotAllowed, ReasonForeignPool, ReasonSchedulerProfileMismatch,
	ReasonPoolToleration, ReasonPoolSelector, ReasonPoolNodeName, ReasonNodeUnknown,
	ReasonBindingNotAllowed, ReasonPoolMembershipLocked, ReasonMigrationOutsidePool, ReasonPodAddressOutsideNode, ReasonBoundEvidenceReserved,
	ReasonUnexpectedRequest, ReasonLookupFailed,
}, DeviceReasons...)
