package enforcement

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// snapshot lists the nodes PreFilter asks about: every node of the
// tenant's pool with its cached evidence, then the first node in no pool.
// The evaluator decides a node in no pool by its placement alone (allowed
// under confinement Any, refused under Pool), so one answer stands for all
// of them; Bind still asks about the very node chosen. Nodes of other
// pools are not asked about: whatever their evidence, the answer is
// TENANT_MISMATCH. unpooled is the index of the node in no pool, or -1;
// key identifies the snapshot for answer reuse, and is empty when the
// evaluator will refuse the pod anyway.
func (pl *Enforcement) snapshot(id *identity, nodes []fwk.NodeInfo) (candidates []wire.Node, unpooled int, key string) {
	unpooled = -1
	if id.tenant == nil || id.policy == nil {
		return nil, unpooled, "" // refused before any node is looked at
	}
	pool := id.pool()
	var k snapshotKey
	k.add(string(pl.settings.profile), id.tenant.ID, pool, id.policy.Name, id.policyVersion)
	var first *corev1.Node
	candidates = make([]wire.Node, 0, 64)
	for _, ni := range nodes {
		n := ni.Node()
		switch n.Labels[pl.settings.poolLabel] {
		case pool:
			c := candidate(n, pool)
			version := "none"
			if s := pl.caches.state(n.Name); s != nil {
				c.State, version = &s.Spec, s.ResourceVersion
			}
			k.add(n.Name, string(n.UID), strconv.FormatInt(*c.AllocatableGPUs, 10), strconv.FormatInt(*c.AllocatableSharedGPUs, 10), version)
			candidates = append(candidates, c)
		case "":
			if first == nil {
				first = n
			}
		}
	}
	if first != nil {
		unpooled = len(candidates)
		candidates = append(candidates, wire.Node{Name: first.Name, UID: first.UID})
		k.add("unpooled", first.Name, string(first.UID))
	}
	return candidates, unpooled, k.String()
}

// candidate is the evaluator's view of a node in pool, without its
// evidence: with the GPUs it offers pods, which the evaluator checks
// against the devices in the evidence.
func candidate(n *corev1.Node, pool string) wire.Node {
	return wire.NodeOf(n, pool)
}

// ask returns the evaluator's answer about the snapshot, reusing a recent
// answer about an identical one.
func (pl *Enforcement) ask(ctx context.Context, pod *corev1.Pod, id *identity, candidates []wire.Node, key string) (*wire.EvaluateResponse, error) {
	if ev, ok := pl.answers.get(key); ok && key != "" {
		reusedTotal.Inc()
		return ev, nil
	}
	at := pl.answers.clock.Now()
	ev, err := pl.evaluate(ctx, pointPreFilter, pl.request(pod, id, candidates))
	if err == nil && key != "" {
		pl.answers.put(key, ev, at)
	}
	return ev, err
}

// narrow limits the cycle to the tenant's pool when nodes in no pool are
// refused: Filter would refuse every other node anyway, and skipping them
// spares every plugin's work. The framework reports the nodes left out as
// "didn't satisfy plugin(s) [XilaGuardEnforcement]".
func narrow(st *cycleState) *fwk.PreFilterResult {
	if len(st.judged) == 0 || (st.unpooled != nil && st.unpooled.decision == guard.DecisionAllow) {
		return nil
	}
	names := sets.New[string]()
	for name := range st.judged {
		names.Insert(name)
	}
	return &fwk.PreFilterResult{NodeNames: names}
}

// lookup finds PreFilter's answer about a node.
func lookup(st *cycleState, node *corev1.Node, pool string) *fwk.Status {
	var j *judgement
	switch pool {
	case st.id.pool():
		if j = st.judged[node.Name]; j != nil && j.uid != node.UID {
			j = nil
		}
	case "":
		j = st.unpooled
	default:
		return tenantMismatch(pool, &st.id)
	}
	if j == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) refused by Xila Guard: not judged in this scheduling cycle")
	}
	if j.rechallenge {
		return nil // Bind attests it anew and judges it on that
	}
	return nodeStatus(j)
}

// request builds an evaluation request for the pod.
func (pl *Enforcement) request(pod *corev1.Pod, id *identity, nodes []wire.Node) *wire.EvaluateRequest {
	if nodes == nil {
		nodes = []wire.Node{}
	}
	return &wire.EvaluateRequest{
		Profile: pl.settings.profile,
		Pod:     wire.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Tenant:  id.tenant,
		Policy:  id.policy,
		Nodes:   nodes,
		// The devices of its claims are judged at Bind, one by one.
		DevicesByClaim: devices.ByClaim(pod),
	}
}
