package devices

import (
	"fmt"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// BenchmarkJudge measures what the controlled scheduler's Bind, and the
// webhook, add per allocated device: devices.Judge on a node whose
// evidence and slice list 1, 8 and 64 devices (the last one allocated),
// beside the node-level evaluation of the same node that Bind does anyway
// (node). Run with:
//
//	go test -run '^$' -bench BenchmarkJudge -count 5 ./components/core/devices
func BenchmarkJudge(b *testing.B) {
	ev, policy, node := judgeWorld(b, "gpu.nvidia.com")
	tenant := &wire.Tenant{ID: "acme"}
	for _, n := range []int{1, 8, 64} {
		state := &v1alpha1.NodeSecurityStateSpec{NodeUID: "uid-n1", Incarnation: "i1", ObservedAt: metav1.NewTime(time.Now()),
			Source: v1alpha1.SourceAttested, Complete: true}
		var devs []resourcev1.Device
		for i := range n {
			id, name := fmt.Sprintf("GPU-%d", i), fmt.Sprintf("gpu-%d", i)
			state.Devices = append(state.Devices, v1alpha1.GPUDevice{ID: id, Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingExclusive,
				DRA: &v1alpha1.DRADeviceRef{Driver: "gpu.nvidia.com", Pool: "n1", Device: name}})
			uuid := id
			devs = append(devs, resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: &uuid}}})
		}
		last := fmt.Sprintf("gpu-%d", n-1)
		a := Allocated{Result: &resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n1", Device: last},
			Device: &devs[n-1], Node: node, State: state}
		c := Claim{Namespace: "acme-ml", Name: "train", Tenant: tenant, Policy: policy}
		b.Run(fmt.Sprintf("devices=%d/node", n), func(b *testing.B) {
			req := &wire.EvaluateRequest{Pod: wire.Pod{Namespace: "acme-ml", Name: "train"}, Tenant: tenant, Policy: policy,
				Nodes: []wire.Node{{Name: "n1", UID: "uid-n1", Pool: "acme", State: state}}}
			for b.Loop() {
				if r := ev.Evaluate(req); r.Results[0].Decision != guard.DecisionAllow {
					b.Fatalf("node: %+v", r.Results[0])
				}
			}
		})
		b.Run(fmt.Sprintf("devices=%d/device", n), func(b *testing.B) {
			for b.Loop() {
				if fs := Judge(ev, "", guard.LabelTenantPool, c, a); len(fs) > 0 {
					b.Fatalf("device: %+v", fs)
				}
			}
		})
	}
}
