package enforcement

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// EventsToRegister names the cluster events that may help a pod this
// plugin refused: a node joining, a node's pool label or taints changing,
// the pod's tolerations changing. Changes of TenantBindings,
// PlacementPolicies, NodeSecurityStates and namespaces are not cluster
// events the queue knows; the plugin's own informers wake the pods they
// concern (see activator).
func (pl *Enforcement) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint},
			QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.UpdatePodToleration},
			QueueingHintFn: isSchedulableAfterPodTolerationChange},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod for a new node, or for a
// node whose pool label or taints changed; other label changes cannot
// change this plugin's answer.
func (pl *Enforcement) isSchedulableAfterNodeChange(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	o, _ := oldObj.(*corev1.Node)
	n, ok := newObj.(*corev1.Node)
	switch {
	case !ok || o == nil:
		return fwk.Queue, nil
	case o.Labels[pl.settings.poolLabel] != n.Labels[pl.settings.poolLabel],
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints):
		logger.V(5).Info("Node's pool or taints changed", "pod", klog.KObj(pod), "node", klog.KObj(n))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterPodTolerationChange queues a pod whose own tolerations
// changed.
func isSchedulableAfterPodTolerationChange(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	if p, ok := newObj.(*corev1.Pod); ok && p.UID == pod.UID {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
