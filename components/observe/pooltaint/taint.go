// Package pooltaint keeps the guard.xila.us/tenant-pool NoSchedule taint of
// every node in step with the node's pool label, so that only pods that
// tolerate a pool's taint (the tenant's) land on it by default.
package pooltaint

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Manager taints pool nodes. A node labelled guard.xila.us/tenant-pool=P
// gets exactly one taint with that key: value P, effect NoSchedule. When the
// label goes, the NoSchedule taint with that key goes too. Other taints are
// never touched.
type Manager struct {
	// Client reads and patches nodes.
	Client client.Client
}

var _ reconcile.Reconciler = &Manager{}

// SetupWithManager registers the manager for Nodes.
func (m *Manager) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("pool-taint").For(&corev1.Node{}).Complete(m)
}

// Reconcile brings one node's pool taint in step with its label.
func (m *Manager) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := m.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	want, changed := DesiredTaints(node)
	if !changed {
		return reconcile.Result{}, nil
	}
	base := node.DeepCopy()
	node.Spec.Taints = want
	if err := m.Client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("tainting node %s: %w", node.Name, err)
	}
	return reconcile.Result{}, nil
}

// DesiredTaints returns the node's taints with the pool taint made to match
// the pool label, and whether that changed anything.
func DesiredTaints(node *corev1.Node) ([]corev1.Taint, bool) {
	pool, inPool := node.Labels[guard.LabelTenantPool]
	want := corev1.Taint{Key: guard.TaintTenantPool, Value: pool, Effect: corev1.TaintEffectNoSchedule}
	out := make([]corev1.Taint, 0, len(node.Spec.Taints)+1)
	found := false
	for _, t := range node.Spec.Taints {
		switch {
		case t.Key != guard.TaintTenantPool || t.Effect != corev1.TaintEffectNoSchedule:
			// Only the NoSchedule taint is managed; an administrator's own
			// taint with this key (e.g. NoExecute) is theirs to keep.
			out = append(out, t)
		case inPool && !found && t.Value == pool:
			found = true
			out = append(out, t)
		}
	}
	if inPool && !found {
		out = append(out, want)
	}
	if slices.Equal(out, node.Spec.Taints) || (len(out) == 0 && len(node.Spec.Taints) == 0) {
		return node.Spec.Taints, false
	}
	return out, true
}
