package admission

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
)

// ClaimsPath judges Dynamic Resource Allocation: ResourceClaims and
// ResourceClaimTemplates of tenants at CREATE and UPDATE, and every
// allocation written to resourceclaims/status, whoever writes it.
const ClaimsPath = "/validate-resourceclaims"

// Rules of ClaimsPath.
const (
	// RuleClaim is what a tenant's claim or claim template may ask for.
	RuleClaim = "protected-claim"
	// RuleAllocation is what an allocation may hand out, per device.
	RuleAllocation = "device-allocation"
)

// resource.k8s.io names. Requests arrive as v1: the chart's rules name
// only v1, and the API server converts requests made in other versions.
const (
	resourceGroup          = "resource.k8s.io"
	claimsResource         = "resourceclaims"
	claimTemplatesResource = "resourceclaimtemplates"
)

// ClaimRef names a ResourceClaim.
type ClaimRef struct {
	Namespace, Name string
	UID             types.UID
}

// Devices is what the device rules read about the cluster, from informer
// caches.
type Devices interface {
	// Synced reports whether the caches have been filled once.
	Synced() bool
	// Device returns the device a ResourceSlice publishes under key, with
	// its slice, and false when no slice the cache holds has it.
	Device(key devices.Key) (*resourcev1.ResourceSlice, *resourcev1.Device, bool)
	// Holders lists the claims whose allocation holds the device, but
	// for admin access, which holds nothing.
	Holders(key devices.Key) []ClaimRef
	// ReservedFor lists the allocated claims of a namespace reserved for
	// the named pod.
	ReservedFor(namespace, pod string) []*resourcev1.ResourceClaim
}

// claimsOnOtherNodes refuses a binding of a pod to a node other than the
// one a device of its claims is on: the kubelet there would prepare a
// device of the same name, which nothing judged. The claims are those the
// webhook's cache shows reserved for the pod (kube-scheduler reserves them
// at PreBind, before it binds).
func (v *Validator) claimsOnOtherNodes(ns, pod string, node *corev1.Node) []violation {
	if v.cfg.Devices == nil {
		return nil
	}
	var vs []violation
	for _, c := range v.cfg.Devices.ReservedFor(ns, pod) {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			key := devices.KeyOf(&r)
			slice, d, ok := v.cfg.Devices.Device(key)
			if !ok {
				vs = append(vs, violation{RuleBinding, guard.ReasonDeviceUnknown, "target.name",
					fmt.Sprintf("no ResourceSlice the webhook knows publishes device %s of claim %s", key, c.Name)})
				continue
			}
			if on := devices.NodeOf(slice, d); on != "" && on != node.Name {
				vs = append(vs, violation{RuleBinding, guard.ReasonDeviceNotOnNode, "target.name",
					fmt.Sprintf("device %s of claim %s is on node %s, not %s", key, c.Name, on, node.Name)})
			}
		}
	}
	return vs
}

// ClaimsHandler serves ClaimsPath.
func (v *Validator) ClaimsHandler() http.Handler {
	return v.handler(v.validateClaimRequest)
}

func (v *Validator) validateClaimRequest(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if req.Resource.Group != resourceGroup {
		return unexpected("request", "this endpoint judges %s and %s of %s, got resource %s", claimsResource, claimTemplatesResource, resourceGroup, resourceString(req))
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return unexpected("request", "operation %s on %s; only CREATE and UPDATE are judged", req.Operation, resourceString(req))
	}
	if v.cfg.Devices == nil {
		return deny("request", violation{RuleLookup, guard.ReasonLookupFailed, "",
			"the webhook runs without device enforcement (--devices), so it cannot judge " + resourceString(req)})
	}
	if !v.cfg.Devices.Synced() {
		return deny("request", violation{RuleLookup, guard.ReasonLookupFailed, "",
			"the webhook's caches of ResourceSlices and ResourceClaims have not synced yet, so nothing can be judged"})
	}
	switch {
	case req.Resource.Resource == claimTemplatesResource && req.SubResource == "":
		t, old := &resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaimTemplate{}
		if o := decodeUpdate(req, t, old, "ResourceClaimTemplate"); !o.allowed() {
			return o
		}
		if req.Operation == admissionv1.Update && equality.Semantic.DeepEqual(old.Spec.Spec, t.Spec.Spec) {
			return outcome{}
		}
		return v.judgeClaimSpec(ctx, req, "resourceclaimtemplate "+req.Namespace+"/"+objectName(&t.ObjectMeta), &t.Spec.Spec, "spec.spec")
	case req.Resource.Resource == claimsResource && req.SubResource == "":
		c, old := &resourcev1.ResourceClaim{}, &resourcev1.ResourceClaim{}
		if o := decodeUpdate(req, c, old, "ResourceClaim"); !o.allowed() {
			return o
		}
		// A claim's spec cannot change after creation: an UPDATE changes
		// metadata (finalizers as a claim is deleted), which hands out
		// nothing and is never refused for what the spec asked before.
		if req.Operation == admissionv1.Update && equality.Semantic.DeepEqual(old.Spec, c.Spec) {
			return outcome{}
		}
		return v.judgeClaimSpec(ctx, req, claimSubject(req.Namespace, objectName(&c.ObjectMeta)), &c.Spec, "spec")
	case req.Resource.Resource == claimsResource && req.SubResource == "status":
		return v.judgeAllocation(ctx, req)
	}
	return unexpected("request", "resource %s is not judged here", resourceString(req))
}

func claimSubject(ns, name string) string { return "resourceclaim " + ns + "/" + name }

// objectName is the name of an object, or its generateName with a mark
// for the part the API server adds.
func objectName(m *metav1.ObjectMeta) string {
	if m.Name == "" && m.GenerateName != "" {
		return m.GenerateName + "*"
	}
	return m.Name
}

// decodeUpdate decodes the object of a request, and the old object of an
// UPDATE.
func decodeUpdate(req *admissionv1.AdmissionRequest, obj, old runtime.Object, kind string) outcome {
	if err := decode(req.Object.Raw, obj, kind); err != nil {
		return unexpected("request", "%v", err)
	}
	if req.Operation == admissionv1.Update {
		if err := decode(req.OldObject.Raw, old, kind); err != nil {
			return unexpected("request", "oldObject: %v", err)
		}
	}
	return outcome{}
}

// judgeClaimSpec judges what a claim, or the claims a template stamps
// out, asks for. Claims of namespaces of no tenant are not judged here:
// their allocation is, should it reach a pool node.
func (v *Validator) judgeClaimSpec(ctx context.Context, req *admissionv1.AdmissionRequest, subject string, spec *resourcev1.ResourceClaimSpec, path string) outcome {
	id, err := v.cfg.Cluster.Identity(ctx, req.Namespace)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", req.Namespace, err)})
	}
	if !id.Protected {
		return outcome{}
	}
	if vs := identityViolations(id, RuleClaim); len(vs) > 0 {
		return deny(subject, vs...)
	}
	return deny(subject, claimSpecViolations(spec, &id.Policy.Spec, id.Policy.Name, path)...)
}

// identityViolations refuses what belongs to a tenant that cannot be
// resolved, or that has no policy.
func identityViolations(id Identity, rule string) []violation {
	switch {
	case id.Tenant == nil:
		return []violation{tenantUnresolved(id)}
	case id.Policy == nil:
		detail := "no PlacementPolicy applies to tenant " + id.Tenant.ID
		if id.Note != "" {
			detail += ": " + id.Note
		}
		return []violation{{rule, guard.ReasonNoPolicy, "metadata.namespace", detail}}
	}
	return nil
}

// claimSpecViolations judges every request and configuration of a claim
// spec against the tenant's policy.
func claimSpecViolations(spec *resourcev1.ResourceClaimSpec, pol *v1alpha1.PlacementPolicySpec, policyName, path string) []violation {
	dp := pol.Devices
	if dp == nil {
		dp = &v1alpha1.DevicePolicy{}
	}
	var vs []violation
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		p := fmt.Sprintf("%s.devices.requests[%d]", path, i)
		if e := r.Exactly; e != nil {
			vs = append(vs, requestViolations(dp, policyName, p+".exactly", deviceRequest{
				class: e.DeviceClassName, mode: e.AllocationMode, count: e.Count, admin: e.AdminAccess,
				tolerations: e.Tolerations, capacity: e.Capacity,
			})...)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			vs = append(vs, requestViolations(dp, policyName, fmt.Sprintf("%s.firstAvailable[%d]", p, j), deviceRequest{
				class: s.DeviceClassName, mode: s.AllocationMode, count: s.Count,
				tolerations: s.Tolerations, capacity: s.Capacity,
			})...)
		}
	}
	for i, c := range spec.Devices.Config {
		if c.Opaque == nil {
			continue
		}
		p := fmt.Sprintf("%s.devices.config[%d].opaque", path, i)
		vs = append(vs, configViolations(pol, policyName, p, []devices.Config{{Opaque: c.Opaque}}, "")...)
	}
	return vs
}

// deviceRequest is what the rules read of an exact request or a subrequest.
type deviceRequest struct {
	class       string
	mode        resourcev1.DeviceAllocationMode
	count       int64
	admin       *bool
	tolerations []resourcev1.DeviceToleration
	capacity    *resourcev1.CapacityRequirements
}

func requestViolations(dp *v1alpha1.DevicePolicy, policyName, path string, r deviceRequest) []violation {
	var vs []violation
	if !slices.Contains(dp.DeviceClasses, r.class) {
		allowed := "none"
		if len(dp.DeviceClasses) > 0 {
			allowed = strings.Join(dp.DeviceClasses, ", ")
		}
		vs = append(vs, violation{RuleClaim, guard.ReasonDeviceClassNotAllowed, path + ".deviceClassName",
			fmt.Sprintf("DeviceClass %q is not among those policy %s allows (%s)", r.class, policyName, allowed)})
	}
	if r.admin != nil && *r.admin {
		vs = append(vs, violation{RuleClaim, guard.ReasonDeviceAdminAccess, path + ".adminAccess",
			"admin access reaches devices that other claims hold; tenants may not ask for it"})
	}
	for i, t := range r.tolerations {
		if t.Key == "" && t.Operator == resourcev1.DeviceTolerationOpExists || strings.HasPrefix(t.Key, guard.GroupName+"/") {
			vs = append(vs, violation{RuleClaim, guard.ReasonDeviceTaintTolerated, fmt.Sprintf("%s.tolerations[%d]", path, i),
				fmt.Sprintf("the toleration would keep devices that %s takes out of service (taint key %s) in reach", "Xila Guard", guard.DeviceTaintKey)})
		}
	}
	switch {
	case r.mode == resourcev1.DeviceAllocationModeAll && !dp.AllowAllocationModeAll:
		vs = append(vs, violation{RuleClaim, guard.ReasonDeviceCountExceeded, path + ".allocationMode",
			fmt.Sprintf("allocationMode All takes every matching device; policy %s does not allow it (devices.allowAllocationModeAll)", policyName)})
	case dp.MaxDevicesPerRequest != nil && r.count > *dp.MaxDevicesPerRequest:
		vs = append(vs, violation{RuleClaim, guard.ReasonDeviceCountExceeded, path + ".count",
			fmt.Sprintf("count %d exceeds the %d devices per request policy %s allows", r.count, *dp.MaxDevicesPerRequest, policyName)})
	}
	if r.capacity != nil && len(r.capacity.Requests) > 0 && !dp.AllowCapacityRequests {
		vs = append(vs, violation{RuleClaim, guard.ReasonDeviceCapacityRequest, path + ".capacity",
			fmt.Sprintf("a capacity request shares the device with other claims; policy %s does not allow it (devices.allowCapacityRequests)", policyName)})
	}
	return vs
}

// configViolations judges a claim's configurations against the policy
// (devices.ConfigFindings).
func configViolations(pol *v1alpha1.PlacementPolicySpec, policyName, path string, configs []devices.Config, request string) []violation {
	return findingViolations(RuleClaim, path, devices.ConfigFindings(pol, policyName, configs, request))
}

func findingViolations(rule, path string, fs []devices.Finding) []violation {
	vs := make([]violation, 0, len(fs))
	for _, f := range fs {
		vs = append(vs, violation{rule, f.Reason, path, f.Detail})
	}
	return vs
}

// judgeAllocation judges a write to resourceclaims/status. A new or
// changed allocation is judged device by device, and so is an allocation
// that gains a consumer. Taking an allocation or a consumer away, and
// everything else a status says (device conditions a driver reports), is
// allowed: it hands nothing out.
func (v *Validator) judgeAllocation(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	claim, old := &resourcev1.ResourceClaim{}, &resourcev1.ResourceClaim{}
	if o := decodeUpdate(req, claim, old, "ResourceClaim"); !o.allowed() {
		return o
	}
	subject := claimSubject(req.Namespace, objectName(&claim.ObjectMeta))
	a := claim.Status.Allocation
	if a == nil {
		return outcome{}
	}
	changed := old.Status.Allocation == nil || !equality.Semantic.DeepEqual(old.Status.Allocation, a)
	added := addedConsumers(old.Status.ReservedFor, claim.Status.ReservedFor)
	if !changed && len(added) == 0 {
		return outcome{}
	}
	id, err := v.cfg.Cluster.Identity(ctx, req.Namespace)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", req.Namespace, err)})
	}
	if !id.Protected {
		return deny(subject, v.foreignAllocation(ctx, req.Namespace, claim)...)
	}
	if vs := identityViolations(id, RuleAllocation); len(vs) > 0 {
		return deny(subject, vs...)
	}
	var vs []violation
	for i, c := range claim.Status.ReservedFor {
		if slices.Contains(added, c.UID) && (c.APIGroup != "" || c.Resource != "pods") {
			vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceConsumerNotAllowed, fmt.Sprintf("status.reservedFor[%d]", i),
				fmt.Sprintf("a tenant's claim is reserved for pods of its namespace only, not for %s.%s %s", c.Resource, c.APIGroup, c.Name)})
		}
	}
	// What the claim asks for is judged again against the policy as it is
	// now: a claim of a namespace the tenant label does not route to the
	// claims webhook, or made before the policy narrowed, is held to it
	// when it is handed a device.
	for _, vi := range claimSpecViolations(&claim.Spec, &id.Policy.Spec, id.Policy.Name, "spec") {
		vi.rule = RuleAllocation
		vs = append(vs, vi)
	}
	judged := added
	if changed {
		judged = judged[:0:0]
		for _, c := range claim.Status.ReservedFor {
			judged = append(judged, c.UID)
		}
	}
	vs = append(vs, v.vmGPUConsumers(ctx, req.Namespace, claim, judged)...)
	configs := devices.AllocationConfigs(a)
	for i := range a.Devices.Results {
		vs = append(vs, v.judgeDevice(ctx, req.Namespace, claim, id, configs, i)...)
	}
	return deny(subject, vs...)
}

// addedConsumers are the UIDs of consumers in now that were not in before.
func addedConsumers(before, now []resourcev1.ResourceClaimConsumerReference) []types.UID {
	var out []types.UID
	for _, c := range now {
		if !slices.ContainsFunc(before, func(b resourcev1.ResourceClaimConsumerReference) bool { return b.UID == c.UID }) {
			out = append(out, c.UID)
		}
	}
	return out
}

// judgeDevice judges the i-th device of a tenant claim's allocation
// (devices.Judge): the device must be one the node's evidence names and
// agrees with, the evaluator must allow that one device under the
// tenant's policy as the allocation's configuration shares it, and no
// claim of another tenant may hold it.
func (v *Validator) judgeDevice(ctx context.Context, ns string, claim *resourcev1.ResourceClaim, id Identity, configs []devices.Config, i int) []violation {
	r := &claim.Status.Allocation.Devices.Results[i]
	path := fmt.Sprintf("status.allocation.devices.results[%d]", i)
	key := devices.KeyOf(r)
	slice, d, ok := v.cfg.Devices.Device(key)
	if !ok {
		return []violation{{RuleAllocation, guard.ReasonDeviceUnknown, path,
			fmt.Sprintf("no ResourceSlice the webhook knows publishes device %s", key)}}
	}
	name := devices.NodeOf(slice, d)
	node, known := v.cfg.Cluster.Node(name)
	if name == "" || !known {
		return []violation{{RuleAllocation, guard.ReasonDeviceUnknown, path,
			fmt.Sprintf("device %s is on no node the webhook knows (%q)", key, name)}}
	}
	st, _ := v.cfg.Cluster.State(name)
	holders := 0
	for _, h := range v.cfg.Devices.Holders(key) {
		if h.UID != claim.UID && (h.Namespace != ns || h.Name != claim.Name) {
			holders++
		}
	}
	fs := devices.Judge(v.cfg.Evaluator, v.cfg.Profile, v.cfg.PoolLabel,
		devices.Claim{Namespace: ns, Name: claim.Name, Tenant: id.Tenant, Policy: id.Policy},
		devices.Allocated{Result: r, Configs: configs, Device: d, Node: node, State: st,
			Consumers: len(claim.Status.ReservedFor), Holders: holders})
	vs := findingViolations(RuleAllocation, path, fs)
	for j := range vs {
		// Point at the field of the result that says it, where one does.
		switch vs[j].reason {
		case guard.ReasonDeviceAdminAccess:
			vs[j].field = path + ".adminAccess"
		case guard.ReasonDeviceCapacityRequest:
			vs[j].field = path + ".shareID"
		}
	}
	if r.AdminAccess != nil && *r.AdminAccess {
		return vs
	}
	if len(fs) > 0 && isEvidenceGap(fs[0].Reason) {
		return vs
	}
	return append(vs, v.otherTenantHolders(ctx, ns, claim, id, key, path)...)
}

// isEvidenceGap is a finding that leaves nothing else to judge.
func isEvidenceGap(r guard.Reason) bool {
	return r == guard.ReasonDeviceEvidenceMissing || r == guard.ReasonDeviceEvidenceMismatch
}

// otherTenantHolders refuses a device that a claim of another tenant, or
// of no tenant, holds.
func (v *Validator) otherTenantHolders(ctx context.Context, ns string, claim *resourcev1.ResourceClaim, id Identity, key devices.Key, path string) []violation {
	var vs []violation
	for _, h := range v.cfg.Devices.Holders(key) {
		if h.UID == claim.UID || h.Namespace == ns && h.Name == claim.Name {
			continue
		}
		hid, err := v.cfg.Cluster.Identity(ctx, h.Namespace)
		switch {
		case err != nil:
			vs = append(vs, violation{RuleLookup, guard.ReasonLookupFailed, path,
				fmt.Sprintf("device %s is held by claim %s/%s, whose tenant cannot be told: %v", key, h.Namespace, h.Name, err)})
		case hid.Tenant == nil || hid.Tenant.ID != id.Tenant.ID:
			vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceHeldByOtherTenant, path,
				fmt.Sprintf("device %s is held by claim %s/%s of %s", key, h.Namespace, h.Name, tenantName(hid))})
		}
	}
	return vs
}

func tenantName(id Identity) string {
	if id.Tenant == nil {
		if id.Protected {
			return "an unresolved tenant"
		}
		return "no tenant"
	}
	return "tenant " + id.Tenant.ID
}

// foreignAllocation judges the allocation of a claim of no tenant: no
// device on a pool node, and none a tenant holds.
func (v *Validator) foreignAllocation(ctx context.Context, ns string, claim *resourcev1.ResourceClaim) []violation {
	var vs []violation
	for i := range claim.Status.Allocation.Devices.Results {
		r := &claim.Status.Allocation.Devices.Results[i]
		key := devices.KeyOf(r)
		path := fmt.Sprintf("status.allocation.devices.results[%d]", i)
		slice, d, ok := v.cfg.Devices.Device(key)
		if !ok {
			// The webhook sees every slice: a device it does not know is
			// one its cache has not seen yet, or none at all. The
			// allocator tries again.
			vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceUnknown, path,
				fmt.Sprintf("no ResourceSlice the webhook knows publishes device %s", key)})
			continue
		}
		name := devices.NodeOf(slice, d)
		node, known := v.cfg.Cluster.Node(name)
		if name != "" && !known {
			vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceUnknown, path,
				fmt.Sprintf("device %s is on node %q, which the webhook does not know, so it cannot tell whether the node is in a pool", key, name)})
			continue
		}
		if known && node.Labels[v.cfg.PoolLabel] != "" {
			vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceInForeignPool, path,
				fmt.Sprintf("device %s is on node %s of pool %s, and namespace %s belongs to no tenant", key, node.Name, node.Labels[v.cfg.PoolLabel], ns)})
			continue
		}
		// Admin access too: any namespace creator can label a namespace
		// for admin access, and a tenant's device is not theirs to reach.
		for _, h := range v.cfg.Devices.Holders(key) {
			if h.Namespace == ns && h.Name == claim.Name {
				continue
			}
			if hid, err := v.cfg.Cluster.Identity(ctx, h.Namespace); err != nil || hid.Protected {
				vs = append(vs, violation{RuleAllocation, guard.ReasonDeviceHeldByOtherTenant, path,
					fmt.Sprintf("device %s is held by claim %s/%s of a tenant", key, h.Namespace, h.Name)})
			}
		}
	}
	return vs
}
