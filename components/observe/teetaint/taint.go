// Package teetaint keeps the guard.xila.us/tee NoSchedule taint of every
// node in step with its attested evidence: a node whose attested
// NodeSecurityState shows a TEE carries the taint with the TEE type as
// value, so that only pods that tolerate it (those that request an enclave
// resource, or whose policy asks for a TEE) land there.
package teetaint

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Manager taints TEE nodes. Only the NoSchedule taint with key
// guard.xila.us/tee is managed; every other taint is left alone.
type Manager struct {
	// Client reads nodes and NodeSecurityStates and patches nodes.
	Client client.Client
}

var _ reconcile.Reconciler = &Manager{}

// SetupWithManager registers the manager for Nodes and their
// NodeSecurityStates (named after them).
func (m *Manager) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("tee-taint").For(&corev1.Node{}).
		Watches(&v1alpha1.NodeSecurityState{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
		})).Complete(m)
}

// Reconcile brings one node's TEE taint in step with its evidence.
func (m *Manager) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := m.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	nss := &v1alpha1.NodeSecurityState{}
	if err := m.Client.Get(ctx, req.NamespacedName, nss); apierrors.IsNotFound(err) {
		nss = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the evidence of node %s: %w", req.Name, err)
	}
	want, changed := DesiredTaints(node, nss)
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

// TEEOf returns the TEE type the node's evidence shows, or "": attested
// evidence about this very node (its UID) that names a TEE, whatever its
// verdict, since a refused TEE node is still no place for other pods.
func TEEOf(node *corev1.Node, nss *v1alpha1.NodeSecurityState) v1alpha1.TEEType {
	if nss == nil || nss.Spec.Source != v1alpha1.SourceAttested || nss.Spec.NodeUID != node.UID || nss.Spec.TEE == nil {
		return ""
	}
	return nss.Spec.TEE.Type
}

// DesiredTaints returns the node's taints with the TEE taint made to match
// its evidence, and whether that changed anything.
func DesiredTaints(node *corev1.Node, nss *v1alpha1.NodeSecurityState) ([]corev1.Taint, bool) {
	tee := string(TEEOf(node, nss))
	out := make([]corev1.Taint, 0, len(node.Spec.Taints)+1)
	found := false
	for _, t := range node.Spec.Taints {
		switch {
		case t.Key != guard.TaintTEE || t.Effect != corev1.TaintEffectNoSchedule:
			out = append(out, t)
		case tee != "" && !found && t.Value == tee:
			found = true
			out = append(out, t)
		}
	}
	if tee != "" && !found {
		out = append(out, corev1.Taint{Key: guard.TaintTEE, Value: tee, Effect: corev1.TaintEffectNoSchedule})
	}
	if slices.Equal(out, node.Spec.Taints) || (len(out) == 0 && len(node.Spec.Taints) == 0) {
		return node.Spec.Taints, false
	}
	return out, true
}
