package evaluate

import (
	"reflect"
	"slices"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// A pod that takes GPUs only through DRA claims is judged on the node
// without the devices the evidence names for DRA: those are judged one by
// one where they are allocated. Everything else about the node still
// counts, the devices that device plugins hand out included.
func TestDevicesByClaim(t *testing.T) {
	dra := func(i int) *v1alpha1.DRADeviceRef {
		return &v1alpha1.DRADeviceRef{Driver: "gpu.nvidia.com", Pool: "node-1", Device: []string{"gpu-0", "gpu-1"}[i]}
	}
	named := func(s *v1alpha1.NodeSecurityStateSpec) {
		for i := range s.Devices {
			s.Devices[i].DRA = dra(i)
		}
	}
	secondSliced := func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices[1].SharingMode = v1alpha1.SharingTimeSlicing }
	tests := []struct {
		name    string
		state   *v1alpha1.NodeSecurityStateSpec
		byClaim bool
		want    []guard.Reason // nil: allowed
	}{
		{"DRA devices in two modes, a pod of GPU resources: mixed", compliantState(named, secondSliced), false, []guard.Reason{guard.ReasonMixedPool}},
		{"DRA devices in two modes, a pod of claims: judged per device", compliantState(named, secondSliced), true, nil},
		{"every DRA device time-sliced, a pod of claims", compliantState(named, allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing })), true, nil},
		{"a device plugin's devices in two modes, a pod of claims: mixed", compliantState(secondSliced), true, []guard.Reason{guard.ReasonMixedPool}},
		{"a device plugin's time-sliced devices, a pod of claims", compliantState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing })), true,
			[]guard.Reason{guard.ReasonTimeSlicingForbidden}},
		{"no device at all under GPU rules, a pod of GPU resources", compliantState(func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices = nil }), false,
			[]guard.Reason{guard.ReasonEvidenceIncomplete}},
		{"no device at all under GPU rules, a pod of claims", compliantState(func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices = nil }), true, nil},
		{"the node's other facts still count for a pod of claims", compliantState(named, func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Measurement = "other" }), true,
			[]guard.Reason{guard.ReasonMeasurementNotAllowed}},
	}
	ev := newEvaluator(guard.ProfileProduction)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.state.DeepCopy()
			req := request(poolNode(tc.state))
			req.DevicesByClaim = tc.byClaim
			r := ev.Evaluate(req).Results[0]
			if tc.want == nil {
				if r.Decision != guard.DecisionAllow {
					t.Errorf("decision %s %v (%s), want allow", r.Decision, r.Reasons, r.Message)
				}
			} else if !slices.Equal(r.Reasons, tc.want) {
				t.Errorf("reasons %v (%s), want %v", r.Reasons, r.Message, tc.want)
			}
			if !reflect.DeepEqual(tc.state, before) {
				t.Error("the request's evidence was changed")
			}
		})
	}
}
