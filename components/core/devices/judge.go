package devices

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Evaluator is the evaluator library; *evaluate.Evaluator is one.
type Evaluator interface {
	Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse
}

// Allocated is one device of an allocation, with what its judgement
// reads: the device as its ResourceSlice publishes it, its node and the
// node's evidence.
type Allocated struct {
	// Result is the allocation's result for the device.
	Result *resourcev1.DeviceRequestAllocationResult
	// Configs are the allocation's configurations, of every driver.
	Configs []Config
	// Device is the slice's device.
	Device *resourcev1.Device
	// Node is the device's node.
	Node *corev1.Node
	// State is the node's evidence; nil when it has none.
	State *v1alpha1.NodeSecurityStateSpec
	// Consumers is how many consumers the claim is reserved for.
	Consumers int
	// Holders is how many other claims hold the device, of any tenant;
	// zero when the caller does not know.
	Holders int
}

// Finding is one reason a device may not be handed out.
type Finding struct {
	Reason guard.Reason
	Detail string
}

// Claim says whose device it is.
type Claim struct {
	Namespace, Name string
	Tenant          *wire.Tenant
	Policy          *wire.Policy
}

// Judge decides whether a tenant's claim may be given one device: the
// evidence device that names it must agree with what its slice states,
// and the evaluator, given the node's evidence narrowed to that device in
// the mode the allocation's configurations of its driver set (or, when
// none applies, the driver's default mode), must allow
// it under the tenant's policy. A device in confidential-computing mode is
// never shared, a share of capacity needs the policy's leave, and admin
// access is never a tenant's. Under confinement Any a device of a node in
// no pool is not judged, as the node is not. No finding means allowed.
// Who else holds the device is the caller's to judge.
func Judge(ev Evaluator, profile guard.Profile, poolLabel string, c Claim, a Allocated) []Finding {
	r := a.Result
	key := KeyOf(r)
	pol := &c.Policy.Spec
	if r.AdminAccess != nil && *r.AdminAccess {
		return []Finding{{guard.ReasonDeviceAdminAccess, fmt.Sprintf("device %s is allocated with admin access to a tenant's claim", key)}}
	}
	pool := a.Node.Labels[poolLabel]
	if pool == "" && pol.Confinement == v1alpha1.ConfinementAny {
		return nil
	}
	dev, reason, msg := Evidence(a.State, key, FactsOf(key.Driver, a.Device))
	if dev == nil {
		return []Finding{{reason, msg + " (node " + a.Node.Name + ")"}}
	}
	configs := ForDriver(a.Configs, key.Driver)
	out := ConfigFindings(pol, c.Policy.Name, configs, r.Request)
	// A configuration that cannot be read is ConfigFindings' finding.
	mode, _ := DriverSharing(configs, key.Driver, r.Request)
	capacityShare := r.ShareID != nil || len(r.ConsumedCapacity) > 0
	if capacityShare && (pol.Devices == nil || !pol.Devices.AllowCapacityRequests) {
		out = append(out, Finding{guard.ReasonDeviceCapacityRequest,
			fmt.Sprintf("device %s is given out as a share of its capacity, which policy %s does not allow", key, c.Policy.Name)})
	}
	effective := mode
	if effective == "" {
		effective = dev.SharingMode
	}
	if dev.CCMode == v1alpha1.CCModeOn && (Shared(effective, capacityShare) || a.Consumers > 1 || a.Holders > 0) {
		out = append(out, Finding{guard.ReasonDeviceSharingForbidden,
			fmt.Sprintf("device %s runs in confidential-computing mode and is never shared: not by time-slicing or MPS, a share of capacity, another claim, or a second pod of its claim", key)})
	}
	// The device is judged in the mode the driver sets it up in; a
	// configuration adds sharing to a device, it never takes away the
	// sharing its evidence reports, so a device whose evidence says it is
	// shared in another mode is judged in that mode too.
	modes := []v1alpha1.GPUSharingMode{mode}
	if mode != "" && dev.SharingMode != mode && Shared(dev.SharingMode, false) {
		modes = append(modes, "")
	}
	seen := map[guard.Reason]bool{}
	for _, m := range modes {
		for _, f := range judgeNarrowed(ev, profile, c, a, pool, dev, key, m) {
			if !seen[f.Reason] {
				seen[f.Reason] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// judgeNarrowed has the evaluator judge the node's evidence narrowed to dev,
// shared in mode.
func judgeNarrowed(ev Evaluator, profile guard.Profile, c Claim, a Allocated, pool string, dev *v1alpha1.GPUDevice, key Key, mode v1alpha1.GPUSharingMode) []Finding {
	res := ev.Evaluate(&wire.EvaluateRequest{
		Profile: profile,
		Pod:     wire.Pod{Namespace: c.Namespace, Name: c.Name},
		Tenant:  c.Tenant,
		Policy:  c.Policy,
		Nodes:   []wire.Node{{Name: a.Node.Name, UID: a.Node.UID, Pool: pool, State: Narrow(a.State, dev, mode)}},
	})
	var out []Finding
	switch {
	case len(res.Results) != 1:
		out = append(out, Finding{guard.ReasonEvaluatorError, fmt.Sprintf("the evaluator gave %d results for one device (fail closed)", len(res.Results))})
	case res.Results[0].Decision != guard.DecisionAllow:
		nr := res.Results[0]
		rs := nr.Reasons
		if len(rs) == 0 {
			rs = []guard.Reason{guard.ReasonEvaluatorError}
		}
		for j, reason := range rs {
			detail := fmt.Sprintf("device %s on node %s: the evaluator decided %s", key, a.Node.Name, nr.Decision)
			if j == 0 && nr.Message != "" {
				detail += ": " + nr.Message
			}
			out = append(out, Finding{reason, detail})
		}
	}
	return out
}

// ConfigFindings judges the configurations that apply to a request
// (every one when request is empty): how they share the device against the
// policy's gpuSharing, and opaque configurations of drivers that are not
// read against devices.opaqueConfigDrivers.
func ConfigFindings(pol *v1alpha1.PlacementPolicySpec, policyName string, configs []Config, request string) []Finding {
	mode, unread, err := Sharing(configs, request)
	if err != nil {
		return []Finding{{guard.ReasonDeviceConfigNotAllowed, err.Error()}}
	}
	var out []Finding
	for _, d := range unread {
		if pol.Devices == nil || !slices.Contains(pol.Devices.OpaqueConfigDrivers, d) {
			out = append(out, Finding{guard.ReasonDeviceConfigNotAllowed,
				fmt.Sprintf("the configuration of driver %s cannot be read, and policy %s does not list it in devices.opaqueConfigDrivers", d, policyName)})
		}
	}
	// Every configuration that applies is judged on its own: which one a
	// driver finally applies depends on the driver (the last that applies,
	// one whose kind fits the device, ...), so none may share the device
	// in a mode the policy forbids.
	forbidden := map[v1alpha1.GPUSharingMode]bool{}
	for _, c := range configs {
		if m, _, _ := Sharing([]Config{c}, request); m != "" && SharingForbidden(pol.GPUSharing, m) && !forbidden[m] {
			forbidden[m] = true
			out = append(out, Finding{guard.ReasonDeviceSharingForbidden,
				fmt.Sprintf("a configuration shares the device by %s, which policy %s forbids", m, policyName)})
		}
	}
	if mode != "" && SharingForbidden(pol.GPUSharing, mode) && !forbidden[mode] {
		out = append(out, Finding{guard.ReasonDeviceSharingForbidden,
			fmt.Sprintf("the configuration shares the device by %s, which policy %s forbids", mode, policyName)})
	}
	return out
}

// SharingForbidden reports whether the policy forbids a sharing mode, as
// the evaluator reads gpuSharing.
func SharingForbidden(s *v1alpha1.GPUSharingPolicy, mode v1alpha1.GPUSharingMode) bool {
	if s == nil {
		return false
	}
	return slices.Contains(s.ForbiddenModes, mode) || len(s.AllowedModes) > 0 && !slices.Contains(s.AllowedModes, mode)
}
