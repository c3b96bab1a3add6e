package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// SettingsReconciler keeps the settings ConfigMap of the platform
// namespace: the GPU resource names of every class, which the pod policy
// refuses to pods other than KubeVirt's launchers, the user name of
// KubeVirt's controller, which creates them, and the VMIs that hold a
// device, whose launchers alone may request them; for classes of dynamic
// resource allocation, their DeviceClasses and the VMIs holding a device
// of each, which the webhook reads to judge allocations. It exists even when no class
// does, since the policy refuses every GPU pod while it is missing.
type SettingsReconciler struct {
	// Client reads from the cache and writes the ConfigMap.
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
	return types.NamespacedName{Namespace: r.Namespace, Name: gpuv1alpha1.SettingsConfigMap}
}

// Reconcile writes the ConfigMap when it is missing or out of date.
func (r *SettingsReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var classes gpuv1alpha1.GPUClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing classes: %w", err)
	}
	var devices gpuv1alpha1.GPUDeviceList
	if err := r.Client.List(ctx, &devices); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing devices: %w", err)
	}
	want := map[string]string{
		gpuv1alpha1.SettingsKeyResourceNames:      ResourceNames(classes.Items),
		gpuv1alpha1.SettingsKeyKubeVirtController: r.KubeVirtController,
		gpuv1alpha1.SettingsKeyHolders:            Holders(devices.Items),
		gpuv1alpha1.SettingsKeyDeviceClasses:      DeviceClasses(classes.Items),
		gpuv1alpha1.SettingsKeyClaimHolders:       ClaimHolders(classes.Items, devices.Items),
	}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, r.key(), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: gpuv1alpha1.SettingsConfigMap, Labels: map[string]string{LabelManagedBy: ManagedBy}},
			Data:       want,
		}
		if err := r.Client.Create(ctx, cm); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return reconcile.Result{RequeueAfter: conflictRetry}, nil
			}
			return reconcile.Result{}, fmt.Errorf("creating ConfigMap %s: %w", r.key(), err)
		}
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading ConfigMap %s: %w", r.key(), err)
	}
	current := true
	for k, v := range want {
		if got, ok := cm.Data[k]; !ok || got != v {
			current = false
		}
	}
	if current && cm.Labels[LabelManagedBy] == ManagedBy {
		return reconcile.Result{}, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range want {
		cm.Data[k] = v
	}
	cm.Labels[LabelManagedBy] = ManagedBy
	if err := r.Client.Update(ctx, cm); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("updating ConfigMap %s: %w", r.key(), err)
	}
	return reconcile.Result{}, nil
}
