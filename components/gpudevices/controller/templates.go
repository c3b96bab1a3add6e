package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// TemplateReconciler orders the devices that VMIs ask for through their
// device template (the device label naming a missing device, and the
// device-class annotation), and deletes them when their VMI goes.
type TemplateReconciler struct {
	// Client reads from the cache (VMIs included) and writes devices.
	Client client.Client
	// Recorder records Events on the devices it creates.
	Recorder EventRecorder
}

var _ reconcile.Reconciler = &TemplateReconciler{}

// Reconcile handles the device template of one VMI.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vmi := NewVMI()
	err := r.Client.Get(ctx, req.NamespacedName, vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading VMI %s: %w", req, err)
	}
	if err != nil || vmi.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, r.deleteTemplateDevices(ctx, req.Namespace, req.Name)
	}
	name, class := deviceOf(vmi), vmi.GetAnnotations()[gpuv1alpha1.AnnotationDeviceClass]
	if name == "" || class == "" {
		return reconcile.Result{}, nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		log.FromContext(ctx).Info("not ordering a template device: the device label is not a valid name",
			"device", name, "problems", strings.Join(errs, "; "))
		return reconcile.Result{}, nil
	}
	if errs := validation.IsValidLabelValue(vmi.GetName()); len(errs) > 0 {
		log.FromContext(ctx).Info("not ordering a template device: the VMI's name cannot be the value of "+gpuv1alpha1.LabelTemplateDevice,
			"device", name, "problems", strings.Join(errs, "; "))
		return reconcile.Result{}, nil
	}
	dev := &gpuv1alpha1.GPUDevice{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, dev); err == nil {
		return reconcile.Result{}, nil
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading device %s/%s: %w", req.Namespace, name, err)
	}
	dev = &gpuv1alpha1.GPUDevice{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name, Labels: map[string]string{gpuv1alpha1.LabelTemplateDevice: vmi.GetName()}},
		Spec:       gpuv1alpha1.GPUDeviceSpec{ClassName: class, Count: int32(max(gpuCount(vmi), 1))},
	}
	if err := r.Client.Create(ctx, dev); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("creating template device %s/%s: %w", req.Namespace, name, err)
	}
	r.Recorder.Eventf(dev, vmi, corev1.EventTypeNormal, EventTemplateDeviceCreated, "Order",
		"ordered %d devices of class %s for the device template of VMI %s", dev.Spec.Count, class, vmi.GetName())
	return reconcile.Result{}, nil
}

// deleteTemplateDevices deletes the devices ordered for the template of a
// VMI that is gone or going; their finalizer keeps them while a VMI uses
// them.
func (r *TemplateReconciler) deleteTemplateDevices(ctx context.Context, namespace, vmi string) error {
	var devices gpuv1alpha1.GPUDeviceList
	if err := r.Client.List(ctx, &devices, client.InNamespace(namespace), client.MatchingLabels{gpuv1alpha1.LabelTemplateDevice: vmi}); err != nil {
		return fmt.Errorf("listing the template devices of VMI %s/%s: %w", namespace, vmi, err)
	}
	for i := range devices.Items {
		dev := &devices.Items[i]
		if !dev.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, dev, client.Preconditions{UID: &dev.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting template device %s/%s: %w", namespace, dev.Name, err)
		}
		log.FromContext(ctx).Info("deleted the template device of a VMI that is gone", "device", dev.Name, "vmi", vmi)
	}
	return nil
}
