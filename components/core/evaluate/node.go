package evaluate

import (
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// node decides one node, stage by stage; see the package documentation.
func (in *input) node(n *wire.Node, pod *wire.Verdict) wire.NodeResult {
	res := wire.NodeResult{Node: n.Name}
	if n.State != nil {
		res.Incarnation = n.State.Incarnation
	}
	v, ok := in.judge(n, pod)
	if !ok {
		v = *pod
	}
	res.Decision, res.Reasons, res.Message = v.Decision, v.Reasons, v.Message
	return res
}

// judge returns the node's verdict, or false when the pod's own verdict
// already refuses every node.
func (in *input) judge(n *wire.Node, pod *wire.Verdict) (wire.Verdict, bool) {
	if pod.Decision != guard.DecisionAllow {
		return wire.Verdict{}, false
	}
	if f, stop := in.placement(n); stop {
		if f.reason == guard.ReasonUnguardedNode {
			return in.verdict([]finding{f}, "allowed outside every pool"), true
		}
		return in.verdict([]finding{f}, ""), true
	}
	s := n.State
	if s == nil {
		return in.verdict([]finding{{guard.ReasonEvidenceMissing, "the node has no NodeSecurityState"}}, ""), true
	}
	if in.devicesByClaim {
		s = withoutDRADevices(s)
	}
	if findings := in.admissible(n, s); len(findings) > 0 {
		return in.verdict(findings, ""), true
	}
	if f, mixed := mixedDevices(s.Devices); mixed {
		return in.verdict([]finding{f}, ""), true
	}
	findings := in.content(s)
	simulated := s.Source == v1alpha1.SourceMock
	if simulated && decide(findings) == guard.DecisionAllow {
		findings = append(findings, finding{guard.ReasonSimulatedEvidence,
			"mock evidence accepted by the lab profile: this proves integration, not isolation"})
	}
	return in.verdict(findings, in.allowMessage(s)), true
}

// withoutDRADevices is the evidence without the devices it names for DRA,
// which a pod that takes GPUs only through claims is judged on one by one
// where they are allocated; s itself when it names none.
func withoutDRADevices(s *v1alpha1.NodeSecurityStateSpec) *v1alpha1.NodeSecurityStateSpec {
	kept := 0
	for i := range s.Devices {
		if s.Devices[i].DRA == nil {
			kept++
		}
	}
	if kept == len(s.Devices) {
		return s
	}
	out := *s
	out.Devices = make([]v1alpha1.GPUDevice, 0, kept)
	for i := range s.Devices {
		if s.Devices[i].DRA == nil {
			out.Devices = append(out.Devices, s.Devices[i])
		}
	}
	return &out
}

// placement is stage 2. It returns a finding and true when the node's pool
// settles the decision before any evidence is read.
func (in *input) placement(n *wire.Node) (finding, bool) {
	switch {
	case n.Pool == "" && in.confinement == v1alpha1.ConfinementAny:
		return finding{guard.ReasonUnguardedNode,
			"the node is in no pool and policy " + in.policyQ + " has confinement Any, so its evidence is not checked"}, true
	case n.Pool == "":
		return finding{guard.ReasonOutsidePool,
			"the node is in no pool and policy " + in.policyQ + " confines tenant " + in.tenantQ + " to pool " + in.poolQ}, true
	case n.Pool != in.pool:
		return finding{guard.ReasonTenantMismatch,
			"the node is in pool " + quote(n.Pool) + ", not in pool " + in.poolQ + " of tenant " + in.tenantQ}, true
	}
	return finding{}, false
}
