package app

import (
	"context"
	"strings"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ownerWatch follows the agent's own DaemonSet while the agent runs. The
// deletion of the DaemonSet reaches this watch before the agent's pod is
// told to stop (the garbage collector has to see it first, then the
// kubelet), and before an uninstall has removed the agent's RBAC or
// ServiceAccount, which would make a last-minute read fail.
type ownerWatch struct {
	name    string
	deleted atomic.Bool
}

// watchOwner starts the watch; daemonSet is "namespace/name".
func watchOwner(ctx context.Context, cs kubernetes.Interface, daemonSet string) (*ownerWatch, error) {
	ns, name, _ := strings.Cut(daemonSet, "/")
	w := &ownerWatch{name: daemonSet}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *v1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Apps().V1().DaemonSets().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(any) { w.deleted.Store(true) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	return w, nil
}

func (w *ownerWatch) observe(obj any) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok && ds.DeletionTimestamp != nil {
		w.deleted.Store(true)
	}
}

// uninstalled decides, as the agent stops, whether it is being
// uninstalled: its DaemonSet was seen deleted, or is gone or being deleted
// now. Anything else — a rolling update, a node drain, an API server that
// does not answer — keeps the dataplane enforcing, so the answer fails
// closed.
func uninstalled(ctx context.Context, cs kubernetes.Interface, daemonSet string, w *ownerWatch) (bool, string) {
	if daemonSet == "" {
		return false, "no --daemonset given"
	}
	if w != nil && w.deleted.Load() {
		return true, "DaemonSet " + daemonSet + " was deleted"
	}
	ns, name, _ := strings.Cut(daemonSet, "/")
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, v1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, "DaemonSet " + daemonSet + " is gone"
	case err != nil:
		return false, "cannot read DaemonSet " + daemonSet + ": " + err.Error()
	case ds.DeletionTimestamp != nil:
		return true, "DaemonSet " + daemonSet + " is being deleted"
	default:
		return false, "DaemonSet " + daemonSet + " still exists"
	}
}
