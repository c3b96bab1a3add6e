package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// DeviceReconciler protects GPUDevices with their finalizer, judges them
// against their class, records their holder and keeps their usage
// records.
type DeviceReconciler struct {
	// Client reads from the cache (VMIs included) and writes devices and
	// usage records.
	Client client.Client
	// Namespace is the platform namespace, where usage records live.
	Namespace string
	// Recorder records Events on devices.
	Recorder EventRecorder
	// Observer is told the phase of each device; nil for none.
	Observer Observer
	// Now defaults to time.Now.
	Now func() time.Time

	mu sync.Mutex
	// conflicts is the last DeviceConflict note of each device, so that
	// an unchanged conflict is reported once.
	conflicts map[types.UID]string
}

var _ reconcile.Reconciler = &DeviceReconciler{}

// Reconcile judges one device and keeps its usage record.
func (r *DeviceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	users, err := r.users(ctx, req.Namespace, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	dev := &gpuv1alpha1.GPUDevice{}
	if err := r.Client.Get(ctx, req.NamespacedName, dev); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading device %s: %w", req, err)
		}
		r.observer().DeviceGone(req.String())
		// A device that went while a VMI still used it keeps its record
		// until that VMI goes too.
		if len(users) == 0 {
			return reconcile.Result{}, r.deleteRecords(ctx, req.Namespace, req.Name)
		}
		return reconcile.Result{}, nil
	}
	released := !dev.DeletionTimestamp.IsZero()
	if !released && !controllerutil.ContainsFinalizer(dev, gpuv1alpha1.FinalizerDevice) {
		if res, err := patchFinalizer(ctx, r.Client, dev, gpuv1alpha1.FinalizerDevice, true); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
	}
	class := &gpuv1alpha1.GPUClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: dev.Spec.ClassName}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading class %s: %w", dev.Spec.ClassName, err)
		}
		class = nil
	}
	holder, others := ChooseHolder(users, released)
	j := Judge(dev, class, holder != nil)
	before := dev.Status.DeepCopy()
	st := NextStatus(dev, j, holder, r.now())
	if !apiequality.Semantic.DeepEqual(st, dev.Status) {
		dev.Status = st
		if err := r.Client.Status().Update(ctx, dev); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return reconcile.Result{RequeueAfter: conflictRetry}, nil
			}
			return reconcile.Result{}, fmt.Errorf("updating the status of device %s: %w", req, err)
		}
		r.recordTransitions(dev, before, len(users))
	}
	r.recordConflict(dev, holder, others)
	r.observer().DeviceObserved(req.String(), dev.Spec.ClassName, string(dev.Status.Phase))

	if dev.Status.HeldBy != nil {
		if res, err := r.writeRecord(ctx, dev); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
	} else if err := r.deleteRecords(ctx, dev.Namespace, dev.Name); err != nil {
		return reconcile.Result{}, err
	}
	if released && len(users) == 0 {
		return patchFinalizer(ctx, r.Client, dev, gpuv1alpha1.FinalizerDevice, false)
	}
	return reconcile.Result{}, nil
}

// users lists the VMIs whose device label names the device.
func (r *DeviceReconciler) users(ctx context.Context, namespace, name string) ([]User, error) {
	vmis := NewVMIList()
	if err := r.Client.List(ctx, vmis, client.InNamespace(namespace), client.MatchingFields{indexVMIDevice: name}); err != nil {
		return nil, fmt.Errorf("listing the VMIs of device %s/%s: %w", namespace, name, err)
	}
	out := make([]User, 0, len(vmis.Items))
	for i := range vmis.Items {
		out = append(out, userOf(&vmis.Items[i]))
	}
	return out, nil
}

// recordTransitions records the Events of a status change.
func (r *DeviceReconciler) recordTransitions(dev *gpuv1alpha1.GPUDevice, before *gpuv1alpha1.GPUDeviceStatus, users int) {
	after := &dev.Status
	if before.Phase != gpuv1alpha1.GPUDeviceReleased && after.Phase == gpuv1alpha1.GPUDeviceReleased {
		r.Recorder.Eventf(dev, nil, corev1.EventTypeNormal, EventDeviceReleased, "Release",
			"the device is being deleted; %d VMIs still use it", users)
	}
	switch {
	case after.HeldBy != nil && (before.HeldBy == nil || before.HeldBy.UID != after.HeldBy.UID):
		r.Recorder.Eventf(dev, nil, corev1.EventTypeNormal, EventDeviceHeld, "Hold",
			"VMI %s (uid %s) holds the device", after.HeldBy.Name, after.HeldBy.UID)
	case after.HeldBy == nil && before.HeldBy != nil:
		r.Recorder.Eventf(dev, nil, corev1.EventTypeNormal, EventDeviceReleased, "Release",
			"VMI %s (uid %s) no longer holds the device", before.HeldBy.Name, before.HeldBy.UID)
	}
	if after.Phase == gpuv1alpha1.GPUDeviceInvalid && (before.Phase != gpuv1alpha1.GPUDeviceInvalid || readyReason(before) != readyReason(after)) {
		r.Recorder.Eventf(dev, nil, corev1.EventTypeWarning, EventDeviceInvalid, "Judge", "%s: %s", readyReason(after), readyMessage(after))
	}
}

// recordConflict records a DeviceConflict Event when several VMIs name a
// device, once for each set of VMIs.
func (r *DeviceReconciler) recordConflict(dev *gpuv1alpha1.GPUDevice, holder *User, others []User) {
	note := ""
	if holder != nil && len(others) > 0 && dev.DeletionTimestamp.IsZero() {
		names := make([]string, len(others))
		for i, o := range others {
			names[i] = o.Name
		}
		note = fmt.Sprintf("VMIs %s also name the device; VMI %s, the oldest, holds it", strings.Join(names, ", "), holder.Name)
	}
	r.mu.Lock()
	if r.conflicts == nil {
		r.conflicts = map[types.UID]string{}
	}
	last := r.conflicts[dev.UID]
	if note == "" {
		delete(r.conflicts, dev.UID)
	} else {
		r.conflicts[dev.UID] = note
	}
	r.mu.Unlock()
	if note != "" && note != last {
		r.Recorder.Eventf(dev, nil, corev1.EventTypeWarning, EventDeviceConflict, "Hold", "%s", note)
	}
}

func readyReason(st *gpuv1alpha1.GPUDeviceStatus) string {
	for _, c := range st.Conditions {
		if c.Type == ConditionReady {
			return c.Reason
		}
	}
	return ""
}

func readyMessage(st *gpuv1alpha1.GPUDeviceStatus) string {
	for _, c := range st.Conditions {
		if c.Type == ConditionReady {
			return c.Message
		}
	}
	return ""
}

func (r *DeviceReconciler) observer() Observer {
	if r.Observer == nil {
		return nopObserver{}
	}
	return r.Observer
}

func (r *DeviceReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
