package guard

// Reasons the admission webhook gives about Dynamic Resource Allocation:
// a tenant's ResourceClaims and ResourceClaimTemplates at creation, and
// each device an allocation hands out when it is written to a claim's
// status. They are among AdmissionReasons.
const (
	// ReasonDeviceClassNotAllowed: a request of a tenant's claim names a
	// DeviceClass that the tenant's PlacementPolicy does not list in
	// devices.deviceClasses, or the policy has no devices section.
	ReasonDeviceClassNotAllowed Reason = "DEVICE_CLASS_NOT_ALLOWED"
	// ReasonDeviceAdminAccess: a tenant's claim asks for admin access to
	// devices, which reaches devices other claims hold.
	ReasonDeviceAdminAccess Reason = "DEVICE_ADMIN_ACCESS"
	// ReasonDeviceTaintTolerated: a tenant's claim tolerates the guard's
	// own device taints (DeviceTaintKey), or every taint: they take
	// devices whose evidence fails out of service.
	ReasonDeviceTaintTolerated Reason = "DEVICE_TAINT_TOLERATED"
	// ReasonDeviceCountExceeded: a request asks for more devices than the
	// policy's devices.maxDevicesPerRequest, or for all matching devices
	// (allocationMode: All) when the policy does not allow it.
	ReasonDeviceCountExceeded Reason = "DEVICE_COUNT_EXCEEDED"
	// ReasonDeviceCapacityRequest: a request asks for part of a device's
	// capacity, which shares the device, and the policy does not allow it.
	ReasonDeviceCapacityRequest Reason = "DEVICE_CAPACITY_REQUEST"
	// ReasonDeviceSharingForbidden: a claim's configuration (its own, or
	// its DeviceClass's in the allocation) shares the device by
	// time-slicing or MPS, which the tenant's policy forbids; or a GPU in
	// confidential-computing mode is to be shared.
	ReasonDeviceSharingForbidden Reason = "DEVICE_SHARING_FORBIDDEN"
	// ReasonDeviceConfigNotAllowed: a claim passes an opaque
	// configuration the webhook cannot read, of a driver the policy does
	// not list in devices.opaqueConfigDrivers.
	ReasonDeviceConfigNotAllowed Reason = "DEVICE_CONFIG_NOT_ALLOWED"
	// ReasonDeviceUnknown: an allocated device is in no ResourceSlice the
	// webhook knows, or is on no node.
	ReasonDeviceUnknown Reason = "DEVICE_UNKNOWN"
	// ReasonDeviceEvidenceMissing: the evidence of the device's node
	// names no device with the allocated driver, pool and name.
	ReasonDeviceEvidenceMissing Reason = "DEVICE_EVIDENCE_MISSING"
	// ReasonDeviceEvidenceMismatch: what the ResourceSlice says about the
	// device (its UUID, model, MIG profile or parent) disagrees with the
	// evidence that names it. A node's credentials write its slices.
	ReasonDeviceEvidenceMismatch Reason = "DEVICE_EVIDENCE_MISMATCH"
	// ReasonDeviceHeldByOtherTenant: the device is allocated to a claim of
	// another tenant, or of no tenant.
	ReasonDeviceHeldByOtherTenant Reason = "DEVICE_HELD_BY_OTHER_TENANT"
	// ReasonDeviceInForeignPool: a claim of no tenant is allocated a
	// device on a node of a tenant's pool. (A tenant's claim on another
	// tenant's pool node gets the evaluator's TENANT_MISMATCH.)
	ReasonDeviceInForeignPool Reason = "DEVICE_IN_FOREIGN_POOL"
	// ReasonDeviceNotOnNode: a pod is bound to a node other than the one
	// a device of its claims is on: the kubelet there would prepare a
	// device of the same name that was never judged.
	ReasonDeviceNotOnNode Reason = "DEVICE_NOT_ON_NODE"
	// ReasonDeviceEnforcementOff: a tenant's pod uses ResourceClaims while
	// the webhook runs without device enforcement, so nothing would judge
	// the devices they hand out.
	ReasonDeviceEnforcementOff Reason = "DEVICE_ENFORCEMENT_OFF"
	// ReasonDeviceConsumerNotAllowed: a tenant's allocated claim is
	// reserved for something other than a pod of its namespace.
	ReasonDeviceConsumerNotAllowed Reason = "DEVICE_CONSUMER_NOT_ALLOWED"
)

// DeviceReasons lists the reasons above, in their order.
var DeviceReasons = []Reason{
	ReasonDeviceClassNotAllowed, ReasonDeviceAdminAccess, ReasonDeviceTaintTolerated,
	ReasonDeviceCountExceeded, ReasonDeviceCapacityRequest, ReasonDeviceSharingForbidden,
	ReasonDeviceConfigNotAllowed, ReasonDeviceUnknown, ReasonDeviceEvidenceMissing,
	ReasonDeviceEvidenceMismatch, ReasonDeviceHeldByOtherTenant,
	ReasonDeviceInForeignPool, ReasonDeviceNotOnNode, ReasonDeviceEnforcementOff, ReasonDeviceConsumerNotAllowed,
}
