package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// SettingsReconciler keeps the GPUSettings of the platform namespace
// (gpuv1alpha1.SettingsName): the GPU resource names of every class, which
// the pod policy refuses to pods other than KubeVirt's launchers, the user
// name of KubeVirt's controller, which creates them, and the VMIs that
// hold a device, whose launchers alone may request them; for classes of
// dynamic resource allocation, their DeviceClasses and the VMIs holding a
// device of each, which the webhook reads to judge allocations. It exists
// even when no class does, since the policies refuse every GPU pod while
// it is missing.
type SettingsReconciler struct {
	// Client reads from the cache and writes the settings.
	Client client.Client
	// Namespace is the platform namespace.
	Namespace string
	// KubeVirtController is the user name of KubeVirt's controller; empty,
	// no pod may request a GPU for VMs.
	KubeVirtController string
}

var _ reconcile.Reconciler = &SettingsReconciler{}

// key is the only request the reconciler handles.
func (r *SettingsReconciler) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: gpuv1alpha1.SettingsName}
}

// Reconcile writes the settings when they are missing or out of date.
func (r *SettingsReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var classes gpuv1alpha1.GPUClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing classes: %w", err)
	}
	var devices gpuv1alpha1.GPUDeviceList
	if err := r.Client.List(ctx, &devices); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing devices: %w", err)
	}
	want := gpuv1alpha1.GPUSettingsSpec{
		ResourceNames:      ResourceNames(classes.Items),
		KubeVirtController: r.KubeVirtController,
		Holders:            Holders(devices.Items),
		DeviceClasses:      DeviceClasses(classes.Items),
		ClaimHolders:       ClaimHolders(classes.Items, devices.Items),
	}
	s := &gpuv1alpha1.GPUSettings{}
	err := r.Client.Get(ctx, r.key(), s)
	switch {
	case apierrors.IsNotFound(err):
		s = &gpuv1alpha1.GPUSettings{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: gpuv1alpha1.SettingsName, Labels: map[string]string{LabelManagedBy: ManagedBy}},
			Spec:       want,
		}
		if err := r.Client.Create(ctx, s); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return reconcile.Result{RequeueAfter: conflictRetry}, nil
			}
			return reconcile.Result{}, fmt.Errorf("creating GPUSettings %s: %w", r.key(), err)
		}
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading GPUSettings %s: %w", r.key(), err)
	}
	if equality.Semantic.DeepEqual(s.Spec, want) && s.Labels[LabelManagedBy] == ManagedBy {
		return reconcile.Result{}, nil
	}
	s.Spec = want
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[LabelManagedBy] = ManagedBy
	if err := r.Client.Update(ctx, s); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("updating GPUSettings %s: %w", r.key(), err)
	}
	return reconcile.Result{}, nil
}
