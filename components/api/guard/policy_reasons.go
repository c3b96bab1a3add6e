package guard

// Reasons the chart's ValidatingAdmissionPolicies give: the API server
// evaluates them itself, so they hold while every Xila Guard pod is down.
// Each refusal's message starts with its code. The policies also give
// ReasonPoolToleration, ReasonPoolSelector and ReasonBoundEvidenceReserved,
// which are among AdmissionReasons.
const (
	// ReasonPoolAdminOnly: someone other than a pool administrator adds,
	// changes or removes a node's pool label or pool taint.
	ReasonPoolAdminOnly Reason = "POOL_ADMIN_ONLY"
	// ReasonPoolTaintMissing: a node would carry the pool label without
	// the matching NoSchedule taint.
	ReasonPoolTaintMissing Reason = "POOL_TAINT_MISSING"
	// ReasonEvidenceLabelNotAllowed: someone other than an evidence
	// labeller, or a node, writes a node label that becomes evidence.
	ReasonEvidenceLabelNotAllowed Reason = "EVIDENCE_LABEL_NOT_ALLOWED"
	// ReasonComplianceLabelNotAllowed: someone other than the observe
	// controller or a pool administrator writes a compliance label.
	ReasonComplianceLabelNotAllowed Reason = "COMPLIANCE_LABEL_NOT_ALLOWED"
	// ReasonAttestedEvidenceNotAllowed: someone other than the attestation
	// controller writes attested evidence.
	ReasonAttestedEvidenceNotAllowed Reason = "ATTESTED_EVIDENCE_NOT_ALLOWED"
	// ReasonReservedNamespace: someone other than an administrator creates
	// a reserved namespace (one that holds identities the platform trusts
	// by name), or a service account or a token of one in it.
	ReasonReservedNamespace Reason = "RESERVED_NAMESPACE"
	// ReasonServiceAddressNotAllowed: someone other than an administrator
	// adds an address to a Service's externalIPs, or a Service of a tenant
	// namespace asks for a loadBalancerIP.
	ReasonServiceAddressNotAllowed Reason = "SERVICE_ADDRESS_NOT_ALLOWED"
	// ReasonGPUDeviceRequired: a VM asks for a GPU (or a host device, DRA
	// claim or GPU resource) without naming a held GPUDevice.
	ReasonGPUDeviceRequired Reason = "GPU_DEVICE_REQUIRED"
	// ReasonGPUResourceForbidden: a pod of a tenant namespace requests a
	// GPU resource without being KubeVirt's launcher pod of a VMI.
	ReasonGPUResourceForbidden Reason = "GPU_RESOURCE_FORBIDDEN"
	// ReasonUsageLabelReserved: a write in a tenant namespace adds or
	// changes the GPU usage-record label.
	ReasonUsageLabelReserved Reason = "USAGE_LABEL_RESERVED"
	// ReasonDeviceFieldPlatformOnly: someone other than the GPU controller
	// or a platform caller sets or removes a GPUDevice's finalizer or
	// template-device label.
	ReasonDeviceFieldPlatformOnly Reason = "DEVICE_FIELD_PLATFORM_ONLY"
	// ReasonGPUClassOfferImmutable: what a protected GPUClass sells is
	// changed.
	ReasonGPUClassOfferImmutable Reason = "GPU_CLASS_OFFER_IMMUTABLE"
	// ReasonGPUClassDeleting: a GPUDevice orders from a class being
	// deleted.
	ReasonGPUClassDeleting Reason = "GPU_CLASS_DELETING"
	// ReasonGPUDeviceHeld: a VMI names a GPUDevice another VMI holds.
	ReasonGPUDeviceHeld Reason = "GPU_DEVICE_HELD"
	// ReasonGPUDeviceClassMismatch: a VMI asks, through a GPUDevice, for a
	// GPU other than the one the device's class offers.
	ReasonGPUDeviceClassMismatch Reason = "GPU_DEVICE_CLASS_MISMATCH"
	// ReasonGPUDeviceNotHeld: KubeVirt's launcher pod requests a GPU for a
	// VMI that holds no GPUDevice.
	ReasonGPUDeviceNotHeld Reason = "GPU_DEVICE_NOT_HELD"
)

// PolicyReasons lists the codes only the chart's admission policies give,
// in the order above.
var PolicyReasons = []Reason{
	ReasonPoolAdminOnly, ReasonPoolTaintMissing, ReasonEvidenceLabelNotAllowed, ReasonComplianceLabelNotAllowed,
	ReasonAttestedEvidenceNotAllowed, ReasonReservedNamespace, ReasonServiceAddressNotAllowed,
	ReasonGPUDeviceRequired, ReasonGPUResourceForbidden, ReasonUsageLabelReserved, ReasonDeviceFieldPlatformOnly,
	ReasonGPUClassOfferImmutable, ReasonGPUClassDeleting, ReasonGPUDeviceHeld, ReasonGPUDeviceClassMismatch,
	ReasonGPUDeviceNotHeld,
}
