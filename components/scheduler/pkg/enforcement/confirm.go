package enforcement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// guardReader reads the guard kinds from the API server, bypassing every
// cache; *guardclient.Client is the real one.
type guardReader interface {
	NodeSecurityState(ctx context.Context, name string) (*v1alpha1.NodeSecurityState, error)
	PlacementPolicy(ctx context.Context, name string) (*v1alpha1.PlacementPolicy, error)
}

// freshFacts is what Bind read from the API server, with the tenant as
// resolved again from the caches.
type freshFacts struct {
	state *v1alpha1.NodeSecurityState // nil when the node has none
	id    identity
}

// stateSpec is the evidence read, nil when the node has none.
func (f *freshFacts) stateSpec() *v1alpha1.NodeSecurityStateSpec {
	if f.state == nil {
		return nil
	}
	return &f.state.Spec
}

// confirm re-judges the chosen node on its NodeSecurityState and policy as
// read from the API server, not the caches, and refuses the bind on
// anything but an allow, or when the node is not the one Filter judged:
// deleted or replaced (another UID) as far as the scheduler knows, its
// evidence describing another node UID, or re-incarnated. When the node is
// refused only because its attested evidence is too old or has no verdict,
// and an attestation controller is configured, it asks the controller to
// attest the node now (bounded by challengeTimeout) and judges the node
// once more on the evidence that wrote; the incarnation must still be the
// one Filter judged. On an allow it also returns the NodeSecurityState
// the allow was judged on, nil when the node has none.
func (pl *Enforcement) confirm(ctx context.Context, pod *corev1.Pod, st *cycleState, nodeName string) (*v1alpha1.NodeSecurityState, *fwk.Status) {
	since := time.Now()
	select {
	case pl.confirms <- struct{}{}:
		defer func() { <-pl.confirms }()
	case <-ctx.Done():
		return nil, fwk.AsStatus(fmt.Errorf("waiting to re-judge node %s: %w", nodeName, context.Cause(ctx)))
	}
	state, status, stale := pl.judgeFresh(ctx, pod, st, nodeName, since)
	if !stale || pl.challenger == nil {
		return state, status
	}
	// The node's attestation is too old or missing: attest it now, and
	// judge it once more on what that wrote.
	at := time.Now()
	err := pl.challenger.Challenge(ctx, nodeName)
	rechallengeDuration.Observe(time.Since(at).Seconds())
	if err != nil {
		rechallengesTotal.WithLabelValues("error").Inc()
		countRefusal(pointBind, []guard.Reason{guard.ReasonAttestationStale})
		return nil, fwk.NewStatus(status.Code(), status.Message()+"; re-attesting the node failed: "+err.Error())
	}
	rechallengesTotal.WithLabelValues("ok").Inc()
	state, status, _ = pl.judgeFresh(ctx, pod, st, nodeName, at)
	return state, status
}

// judgeFresh is one re-judgement of confirm. On an allow, state is the
// evidence judged (nil when the node has none); stale says that the node
// was refused only for the age or absence of its attestation.
func (pl *Enforcement) judgeFresh(ctx context.Context, pod *corev1.Pod, st *cycleState, nodeName string, since time.Time) (state *v1alpha1.NodeSecurityState, _ *fwk.Status, stale bool) {
	node, err := pl.caches.nodes.Get(nodeName)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nodeChanged("node %s was deleted after it was judged", nodeName), false
	case err != nil:
		return nil, fwk.AsStatus(fmt.Errorf("reading node %s: %w", nodeName, err)), false
	case node.UID != st.chosenUID:
		return nil, nodeChanged("node %s was replaced after it was judged: UID %s, now %s", nodeName, st.chosenUID, node.UID), false
	}
	f, status := pl.readFresh(ctx, pod.Namespace, st, nodeName, since)
	if status != nil {
		return nil, status, false
	}
	if f.state != nil && f.state.Spec.NodeUID != st.chosenUID {
		return nil, nodeChanged("the evidence of node %s now describes node UID %s, not the judged %s", nodeName, f.state.Spec.NodeUID, st.chosenUID), false
	}
	if j := st.judged[nodeName]; j != nil && j.incarnation != "" {
		now := "none"
		if f.state != nil {
			now = f.state.Spec.Incarnation
		}
		if now != j.incarnation {
			return nil, nodeChanged("the evidence of node %s changed incarnation after it was judged: %s, now %s", nodeName, j.incarnation, now), false
		}
	}
	n := candidate(node, node.Labels[pl.settings.poolLabel])
	if f.state != nil {
		n.State = &f.state.Spec
	}
	ev, err := pl.evaluate(ctx, pointBind, pl.request(pod, &f.id, []wire.Node{n}))
	if err != nil {
		countRefusal(pointBind, []guard.Reason{guard.ReasonEvaluatorError})
		return nil, mismatchStatus(err), false
	}
	if ev.Pod.Decision != guard.DecisionAllow {
		countRefusal(pointBind, ev.Pod.Reasons)
		return nil, podStatus(ev.Pod, f.id.note), false
	}
	r := ev.Results[0]
	if r.Decision == guard.DecisionAllow {
		if status := pl.judgeClaims(ctx, pod, node, f); status != nil {
			return nil, status, false
		}
		return f.state, nil, false
	}
	stale = freshAttestationHelps(n.State, r.Reasons)
	if !stale || pl.challenger == nil {
		countRefusal(pointBind, r.Reasons)
	}
	return nil, nodeStatus(newJudgement(n.UID, r)), stale
}

// readFresh reads the node's evidence and the policy from the API server,
// both at once, or takes reads other Binds sent after since. The tenant and the name of its policy are resolved again
// from the caches, as in PreFilter: if the tenant changed since, the bind
// is refused and the next cycle judges afresh.
func (pl *Enforcement) readFresh(ctx context.Context, namespace string, st *cycleState, nodeName string, since time.Time) (*freshFacts, *fwk.Status) {
	id, err := pl.caches.resolve(namespace)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if id.tenant == nil || id.tenant.ID != st.id.tenant.ID || id.pool() != st.id.pool() {
		countRefusal(pointBind, []guard.Reason{guard.ReasonTenantUnresolved})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"Xila Guard refused the bind: %s: the tenant or pool of namespace %s changed after the pod was judged",
			guard.ReasonTenantUnresolved, namespace))
	}
	f := &freshFacts{id: id}
	var policy *v1alpha1.PlacementPolicy
	var stateErr, policyErr error
	var wg sync.WaitGroup
	wg.Go(func() { f.state, stateErr = orNil(pl.guard.NodeSecurityState(ctx, nodeName, since)) })
	if id.policy != nil {
		wg.Go(func() { policy, policyErr = orNil(pl.guard.PlacementPolicy(ctx, id.policy.Name, since)) })
	}
	wg.Wait()
	if err := errors.Join(stateErr, policyErr); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("re-reading the evidence of node %s and its policy: %w", nodeName, err))
	}
	switch {
	case id.policy == nil:
	case policy == nil:
		f.id.note = fmt.Sprintf("PlacementPolicy %s was deleted", id.policy.Name)
		f.id.policy = nil
	default:
		f.id.policy = wire.PolicyOf(policy)
	}
	return f, nil
}

// orNil turns NotFound into a nil object without error.
func orNil[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}
