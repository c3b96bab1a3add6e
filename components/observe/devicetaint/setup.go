package devicetaint

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/compliance"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
)

// Served reports whether the API server serves DeviceTaintRules
// (resource.k8s.io/v1alpha3, behind the DRADeviceTaints feature gate in
// Kubernetes 1.35).
func Served(d discovery.DiscoveryInterface) (bool, error) {
	rl, err := d.ServerResourcesForGroupVersion(resourcev1alpha3.SchemeGroupVersion.String())
	if err != nil {
		if discovery.IsGroupDiscoveryFailedError(err) {
			return false, err
		}
		return false, nil
	}
	for _, r := range rl.APIResources {
		if r.Name == "devicetaintrules" {
			return true, nil
		}
	}
	return false, nil
}

// SetupWithManager registers the tainter: a node, its evidence and its
// ResourceSlices judge the node's devices again; a TenantBinding or a
// PlacementPolicy every node's; a rule of the tainter's that someone else
// changed or deleted is put right.
func (t *Tainter) SetupWithManager(mgr ctrl.Manager, workers int) error {
	c := mgr.GetClient()
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return compliance.AllNodes(ctx, c)
	})
	ruleNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetLabels()[LabelManagedBy] != ManagedBy || o.GetLabels()[LabelNode] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetLabels()[LabelNode]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("device-taints").
		For(&corev1.Node{}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.NodeSecurityState{}, &handler.EnqueueRequestForObject{}).
		Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(evidence.SliceNodes)).
		Watches(&resourcev1alpha3.DeviceTaintRule{}, ruleNode).
		Watches(&v1alpha1.TenantBinding{}, all).
		Watches(&v1alpha1.PlacementPolicy{}, all).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(t)
}
