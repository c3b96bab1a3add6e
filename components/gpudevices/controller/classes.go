package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// conflictRetry is how soon a reconcile that lost an update race runs
// again; the newer object is usually in the cache by then.
const conflictRetry = time.Second

// ClassReconciler protects GPUClasses with their finalizer until no device
// names them, and keeps their status.
type ClassReconciler struct {
	// Client reads from the cache and writes classes.
	Client client.Client
	// APIReader reads past the cache, to confirm that no device names a
	// class before its finalizer goes.
	APIReader client.Reader
	// Now defaults to time.Now.
	Now func() time.Time
}

var _ reconcile.Reconciler = &ClassReconciler{}

// Reconcile protects one class.
func (r *ClassReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &gpuv1alpha1.GPUClass{}
	if err := r.Client.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var devices gpuv1alpha1.GPUDeviceList
	if err := r.Client.List(ctx, &devices, client.MatchingFields{indexDeviceClass: class.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the devices of class %s: %w", class.Name, err)
	}
	deleting := !class.DeletionTimestamp.IsZero()
	switch {
	case deleting && len(devices.Items) == 0:
		if !controllerutil.ContainsFinalizer(class, gpuv1alpha1.FinalizerClass) {
			return reconcile.Result{}, nil
		}
		// The cache may not have a device created a moment ago yet.
		n, err := r.devicesNaming(ctx, class.Name)
		if err != nil || n > 0 {
			return reconcile.Result{RequeueAfter: conflictRetry}, err
		}
		return r.patchFinalizer(ctx, class, false)
	case !deleting && !controllerutil.ContainsFinalizer(class, gpuv1alpha1.FinalizerClass):
		if res, err := r.patchFinalizer(ctx, class, true); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
	}
	st := class.Status.DeepCopy()
	st.HeldDevices = 0
	for i := range devices.Items {
		if devices.Items[i].Status.Phase == gpuv1alpha1.GPUDeviceHeld {
			st.HeldDevices++
		}
	}
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonProtected,
		Message: "the class is protected while devices name it", ObservedGeneration: class.Generation,
		LastTransitionTime: metav1.NewTime(r.now()).Rfc3339Copy()}
	if deleting {
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonDeleting
		cond.Message = fmt.Sprintf("the class is being deleted and waits for %d devices: %s", len(devices.Items), deviceNames(devices.Items))
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if apiequality.Semantic.DeepEqual(*st, class.Status) {
		return reconcile.Result{}, nil
	}
	class.Status = *st
	if err := r.Client.Status().Update(ctx, class); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("updating the status of class %s: %w", class.Name, err)
	}
	return reconcile.Result{}, nil
}

// devicesNaming counts the devices that name the class, read from the API
// server.
func (r *ClassReconciler) devicesNaming(ctx context.Context, class string) (int, error) {
	var devices gpuv1alpha1.GPUDeviceList
	if err := r.APIReader.List(ctx, &devices); err != nil {
		return 0, fmt.Errorf("listing devices: %w", err)
	}
	n := 0
	for i := range devices.Items {
		if devices.Items[i].Spec.ClassName == class {
			n++
		}
	}
	return n, nil
}

// patchFinalizer adds or removes the class finalizer.
func (r *ClassReconciler) patchFinalizer(ctx context.Context, class *gpuv1alpha1.GPUClass, add bool) (reconcile.Result, error) {
	return patchFinalizer(ctx, r.Client, class, gpuv1alpha1.FinalizerClass, add)
}

func (r *ClassReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// patchFinalizer adds or removes a finalizer with an optimistic lock; a
// lost race asks for a retry.
func patchFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, add bool) (reconcile.Result, error) {
	before := obj.DeepCopyObject().(client.Object)
	var changed bool
	if add {
		changed = controllerutil.AddFinalizer(obj, finalizer)
	} else {
		changed = controllerutil.RemoveFinalizer(obj, finalizer)
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("updating the finalizers of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return reconcile.Result{}, nil
}

// deviceNames lists a few devices as namespace/name.
func deviceNames(devices []gpuv1alpha1.GPUDevice) string {
	const most = 5
	names := make([]string, 0, most+1)
	for i := range devices {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(devices)-most))
			break
		}
		names = append(names, devices[i].Namespace+"/"+devices[i].Name)
	}
	return strings.Join(names, ", ")
}
