package app

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// uninstalled decides, as the agent stops, whether it is being
// uninstalled: its DaemonSet is gone or being deleted. Anything else — a
// rolling update, a node drain, an API server that does not answer —
// keeps the dataplane enforcing, so the answer fails closed.
func uninstalled(ctx context.Context, cs kubernetes.Interface, daemonSet string) (bool, string) {
	if daemonSet == "" {
		return false, "no --daemonset given"
	}
	ns, name, _ := strings.Cut(daemonSet, "/")
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
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
