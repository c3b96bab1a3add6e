package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// Names of the controllers, also the controller label of the
// reconcile-error metric.
const (
	ControllerClasses   = "gpuclass"
	ControllerSettings  = "gpu-settings"
	ControllerDevices   = "gpudevice"
	ControllerTemplates = "gpu-template-device"
)

// Cache indexes.
const (
	// indexDeviceClass indexes GPUDevices by spec.className.
	indexDeviceClass = "spec.className"
	// indexVMIDevice indexes VMIs by the device their label names.
	indexVMIDevice = "metadata.labels.device"
)

// Options configure the controllers.
type Options struct {
	// Namespace is the platform namespace: the settings and the usage
	// records live there. The manager's cache must see its ConfigMaps and
	// GPUSettings.
	Namespace string
	// Workers bounds concurrent device reconciles.
	Workers int
	// KubeVirtController is the user name of KubeVirt's controller, which
	// the settings name for the pod policy.
	KubeVirtController string
	// Recorder records Events.
	Recorder EventRecorder
	// Observer, when set, is told what the metrics count.
	Observer Observer
}

// Setup registers the cache indexes and the four controllers with mgr. The
// manager's client must read unstructured objects (VMIs) from the cache.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.Namespace == "" || o.Recorder == nil {
		return errors.New("the GPU controllers need a namespace and an event recorder")
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &gpuv1alpha1.GPUDevice{}, indexDeviceClass, func(obj client.Object) []string {
		return []string{obj.(*gpuv1alpha1.GPUDevice).Spec.ClassName}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, NewVMI(), indexVMIDevice, func(obj client.Object) []string {
		if d := deviceOf(obj); d != "" {
			return []string{d}
		}
		return nil
	}); err != nil {
		return err
	}
	c := mgr.GetClient()

	classes := &ClassReconciler{Client: c, APIReader: mgr.GetAPIReader()}
	if err := ctrl.NewControllerManagedBy(mgr).Named(ControllerClasses).
		For(&gpuv1alpha1.GPUClass{}).
		Watches(&gpuv1alpha1.GPUDevice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.(*gpuv1alpha1.GPUDevice).Spec.ClassName}}}
		})).
		Complete(counted(ControllerClasses, classes, o.Observer)); err != nil {
		return err
	}

	settings := &SettingsReconciler{Client: c, Namespace: o.Namespace, KubeVirtController: o.KubeVirtController}
	settingsKey := reconcile.Request{NamespacedName: settings.key()}
	if err := ctrl.NewControllerManagedBy(mgr).Named(ControllerSettings).
		For(&gpuv1alpha1.GPUSettings{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			return obj.GetNamespace() == o.Namespace && obj.GetName() == gpuv1alpha1.SettingsName
		}))).
		Watches(&gpuv1alpha1.GPUClass{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{settingsKey}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A device's holder is in its status, which changes no generation.
		Watches(&gpuv1alpha1.GPUDevice{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{settingsKey}
		})).
		// The settings are written at start even when there is no class.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(settingsKey)
			return nil
		})).
		Complete(counted(ControllerSettings, settings, o.Observer)); err != nil {
		return err
	}

	devices := &DeviceReconciler{Client: c, Namespace: o.Namespace, Recorder: o.Recorder, Observer: o.Observer}
	if err := ctrl.NewControllerManagedBy(mgr).Named(ControllerDevices).
		For(&gpuv1alpha1.GPUDevice{}).
		Watches(NewVMI(), namedDevices, builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, deletionChanged))).
		Watches(&gpuv1alpha1.GPUClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			return devicesOfClass(ctx, c, obj.GetName())
		}), builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			data := obj.(*corev1.ConfigMap).Data
			if data[RecordKeyNamespace] == "" || data[RecordKeyDevice] == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: data[RecordKeyNamespace], Name: data[RecordKeyDevice]}}}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			_, ok := obj.GetLabels()[gpuv1alpha1.LabelUsage]
			return ok && obj.GetNamespace() == o.Namespace
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(o.Workers, 1)}).
		Complete(counted(ControllerDevices, devices, o.Observer)); err != nil {
		return err
	}

	templates := &TemplateReconciler{Client: c, Recorder: o.Recorder}
	return ctrl.NewControllerManagedBy(mgr).Named(ControllerTemplates).
		For(NewVMI(), builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionChanged))).
		Watches(&gpuv1alpha1.GPUDevice{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			return templateVMIs(ctx, c, obj)
		}), builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, deletionChanged))).
		Complete(counted(ControllerTemplates, templates, o.Observer))
}

// deletionChanged passes updates that start an object's deletion.
var deletionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
}}

// namedDevices maps a VMI to the devices its label names, before and
// after an update.
var namedDevices = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueNamedDevice(q, e.Object)
	},
	UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueNamedDevice(q, e.ObjectOld)
		enqueueNamedDevice(q, e.ObjectNew)
	},
	DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueNamedDevice(q, e.Object)
	},
	GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueNamedDevice(q, e.Object)
	},
}

func enqueueNamedDevice(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
	if obj == nil {
		return
	}
	if d := deviceOf(obj); d != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: d}})
	}
}

// devicesOfClass returns requests for the devices that name a class.
func devicesOfClass(ctx context.Context, c client.Reader, class string) []reconcile.Request {
	var devices gpuv1alpha1.GPUDeviceList
	if err := c.List(ctx, &devices, client.MatchingFields{indexDeviceClass: class}); err != nil {
		log.FromContext(ctx).Error(err, "listing the devices of a class", "class", class)
		return nil
	}
	out := make([]reconcile.Request, 0, len(devices.Items))
	for i := range devices.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&devices.Items[i])})
	}
	return out
}

// templateVMIs maps a device to the VMI whose template ordered it and to
// the VMIs that name it, which may order it anew once it is gone.
func templateVMIs(ctx context.Context, c client.Reader, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	if vmi := obj.GetLabels()[gpuv1alpha1.LabelTemplateDevice]; vmi != "" {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: vmi}})
	}
	vmis := NewVMIList()
	if err := c.List(ctx, vmis, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexVMIDevice: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the VMIs of a device", "device", client.ObjectKeyFromObject(obj))
		return out
	}
	for i := range vmis.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vmis.Items[i])})
	}
	return out
}

// counted reports the errors of a reconciler to the observer.
func counted(name string, r reconcile.Reconciler, o Observer) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			o.ReconcileFailed(name)
		}
		return res, err
	})
}
