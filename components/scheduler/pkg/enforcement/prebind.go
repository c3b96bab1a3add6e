package enforcement

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// guardReader reads the guard kinds from the API server, bypassing every
// cache; *guardclient.Client is the real one.
type guardReader interface {
	NodeSecurityState(ctx context.Context, name string) (*v1alpha1.NodeSecurityState, error)
	TenantBinding(ctx context.Context, name string) (*v1alpha1.TenantBinding, error)
	PlacementPolicy(ctx context.Context, name string) (*v1alpha1.PlacementPolicy, error)
}

// freshFacts is what PreBind read from the API server.
type freshFacts struct {
	node  *corev1.Node                // nil when the node is gone
	state *v1alpha1.NodeSecurityState // nil when the node has none
	id    identity
}

// confirm re-judges the chosen node on facts read from the API server, not
// the caches, and refuses the bind on anything but an allow, or when the
// node is not the one Filter judged: deleted, replaced (another UID), or
// its evidence re-incarnated.
func (pl *Enforcement) confirm(ctx context.Context, pod *corev1.Pod, st *cycleState, nodeName string) *fwk.Status {
	f, status := pl.readFresh(ctx, pod.Namespace, st, nodeName)
	if status != nil {
		return status
	}
	switch {
	case f.node == nil:
		return nodeChanged("node %s was deleted after it was judged", nodeName)
	case f.node.UID != st.chosenUID:
		return nodeChanged("node %s was replaced after it was judged: UID %s, now %s", nodeName, st.chosenUID, f.node.UID)
	}
	if j := st.judgementOf(nodeName); j != nil && j.incarnation != "" {
		now := "none"
		if f.state != nil {
			now = f.state.Spec.Incarnation
		}
		if now != j.incarnation {
			return nodeChanged("the evidence of node %s changed incarnation after it was judged: %s, now %s", nodeName, j.incarnation, now)
		}
	}
	n := wire.Node{Name: nodeName, UID: f.node.UID, Pool: f.node.Labels[pl.settings.poolLabel]}
	if f.state != nil {
		n.State = &f.state.Spec
	}
	ev, err := pl.evaluate(ctx, pointPreBind, pl.request(pod, &f.id, []wire.Node{n}))
	if err != nil {
		return evaluatorStatus(err)
	}
	if ev.Pod.Decision != guard.DecisionAllow {
		countRefusal(pointPreBind, ev.Pod.Reasons)
		return podStatus(ev.Pod, f.id.note)
	}
	r, _ := ev.Node(nodeName)
	if r.Decision != guard.DecisionAllow {
		countRefusal(pointPreBind, r.Reasons)
	}
	return nodeStatus(newJudgement(n.UID, r))
}

// readFresh reads the node, its evidence, the tenant's binding, the
// policy and, when the policy or the tenant comes from it, the namespace.
// The tenant stays the one PreFilter resolved; if its binding no longer
// claims the namespace, or the namespace's label changed, the bind is
// refused and the next cycle resolves afresh.
func (pl *Enforcement) readFresh(ctx context.Context, namespace string, st *cycleState, nodeName string) (*freshFacts, *fwk.Status) {
	f := &freshFacts{id: identity{protected: true, binding: st.id.binding, listed: st.id.listed}}
	var binding *v1alpha1.TenantBinding
	var errs [3]error
	var wg sync.WaitGroup
	wg.Go(func() { f.node, errs[0] = orNil(pl.core.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})) })
	wg.Go(func() { f.state, errs[1] = orNil(pl.guard.NodeSecurityState(ctx, nodeName)) })
	if st.id.binding != "" {
		wg.Go(func() { binding, errs[2] = orNil(pl.guard.TenantBinding(ctx, st.id.binding)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("re-reading the facts of node %s: %w", nodeName, err))
		}
	}

	tenant := st.id.tenant
	changed := ""
	switch {
	case st.id.binding != "" && binding == nil:
		changed = "TenantBinding " + st.id.binding + " was deleted"
	case binding != nil && binding.Spec.TenantID != tenant.ID:
		changed = "TenantBinding " + binding.Name + " now names tenant " + binding.Spec.TenantID
	case st.id.listed && !slices.Contains(binding.Spec.Namespaces, namespace):
		changed = "TenantBinding " + binding.Name + " no longer lists namespace " + namespace
	}
	var ns *corev1.Namespace
	if changed == "" && (!st.id.listed || binding == nil || binding.Spec.EffectivePolicyRef == nil) {
		var err error
		if ns, err = pl.core.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("re-reading namespace %s: %w", namespace, err))
		}
		if !st.id.listed && ns.Labels[guard.LabelTenant] != tenant.ID {
			changed = fmt.Sprintf("namespace %s is no longer labelled %s=%s", namespace, guard.LabelTenant, tenant.ID)
		}
	}
	if changed != "" {
		countRefusal(pointPreBind, []guard.Reason{guard.ReasonTenantUnresolved})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			"Xila Guard refused the bind: "+string(guard.ReasonTenantUnresolved)+": "+changed+" since the pod's tenant was resolved")
	}
	f.id.tenant = tenant
	if binding != nil {
		f.id.tenant = &wire.Tenant{ID: binding.Spec.TenantID, Pool: binding.Spec.Pool()}
	}
	name, source := policyName(binding, ns)
	if name == "" {
		f.id.note = "the policy reference was removed since the pod's tenant was resolved"
		return f, nil
	}
	p, err := orNil(pl.guard.PlacementPolicy(ctx, name))
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("re-reading PlacementPolicy %s: %w", name, err))
	}
	if p == nil {
		f.id.note = fmt.Sprintf("PlacementPolicy %s, named by %s, does not exist", name, source)
		return f, nil
	}
	f.id.policy = &wire.Policy{Name: p.Name, Spec: p.Spec}
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
