package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// recordLabels are the labels of the usage record of a device.
func recordLabels(namespace, device string) map[string]string {
	return map[string]string{gpuv1alpha1.LabelUsage: UsageLabelValue(namespace, device), LabelManagedBy: ManagedBy}
}

// records returns the usage records of a device: the ConfigMaps of the
// platform namespace with its usage label, or at one of its names, whose
// data names it.
func (r *DeviceReconciler) records(ctx context.Context, namespace, device string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{gpuv1alpha1.LabelUsage: UsageLabelValue(namespace, device)}); err != nil {
		return nil, fmt.Errorf("listing the usage records of device %s/%s: %w", namespace, device, err)
	}
	var out []corev1.ConfigMap
	seen := map[string]bool{}
	for _, cm := range list.Items {
		if recordOf(cm.Data, namespace, device) {
			out = append(out, cm)
			seen[cm.Name] = true
		}
	}
	// A record whose label someone removed is still found by its name.
	for _, name := range []string{RecordName(namespace, device), AltRecordName(namespace, device)} {
		if seen[name] {
			continue
		}
		cm := corev1.ConfigMap{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &cm)
		switch {
		case err == nil && recordOf(cm.Data, namespace, device):
			out = append(out, cm)
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading usage record %s: %w", name, err)
		}
	}
	return out, nil
}

// writeRecord creates or updates the usage record of a held device and
// deletes any duplicate.
func (r *DeviceReconciler) writeRecord(ctx context.Context, dev *gpuv1alpha1.GPUDevice) (reconcile.Result, error) {
	data := RecordData(dev, dev.Status.HeldBy, dev.Status.ResourceName)
	labels := recordLabels(dev.Namespace, dev.Name)
	existing, err := r.records(ctx, dev.Namespace, dev.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(existing) == 0 {
		name := RecordName(dev.Namespace, dev.Name)
		taken := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, taken)
		switch {
		case err == nil:
			// The name is another device's: gpu-usage-a-b-c is a/b-c and a-b/c.
			name = AltRecordName(dev.Namespace, dev.Name)
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, fmt.Errorf("reading usage record %s: %w", name, err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: name, Labels: labels}, Data: data}
		if err := r.Client.Create(ctx, cm); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return reconcile.Result{RequeueAfter: conflictRetry}, nil
			}
			return reconcile.Result{}, fmt.Errorf("creating usage record %s: %w", name, err)
		}
		return reconcile.Result{}, nil
	}
	keep := 0
	for i := range existing {
		if existing[i].Name == RecordName(dev.Namespace, dev.Name) {
			keep = i
		}
	}
	for i := range existing {
		if i != keep {
			if err := r.deleteRecord(ctx, &existing[i]); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	cm := &existing[keep]
	if maps.Equal(cm.Data, data) && cm.Labels[gpuv1alpha1.LabelUsage] == labels[gpuv1alpha1.LabelUsage] && cm.Labels[LabelManagedBy] == ManagedBy {
		return reconcile.Result{}, nil
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, labels)
	cm.Data = data
	if err := r.Client.Update(ctx, cm); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("updating usage record %s: %w", cm.Name, err)
	}
	return reconcile.Result{}, nil
}

// deleteRecords deletes the usage records of a device.
func (r *DeviceReconciler) deleteRecords(ctx context.Context, namespace, device string) error {
	existing, err := r.records(ctx, namespace, device)
	if err != nil {
		return err
	}
	for i := range existing {
		if err := r.deleteRecord(ctx, &existing[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *DeviceReconciler) deleteRecord(ctx context.Context, cm *corev1.ConfigMap) error {
	err := r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting usage record %s: %w", cm.Name, err)
	}
	return nil
}
