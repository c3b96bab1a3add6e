package enforcement

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Bind re-judges the chosen node of a protected pod on its
// NodeSecurityState and policy as read from the API server (confirm), and
// refuses the bind, which sends the pod back to the queue, unless the
// evaluator allows it and the node is still the one Filter judged. On the
// allow it binds the pod with a Binding that carries, in the annotation
// guard.AnnotationBoundEvidence, the judged node UID and the incarnation
// of the NodeSecurityState the allow was decided on. The API server copies
// a Binding's annotations onto the pod in the same write that sets its
// node, so the record lands with the bind or not at all, and costs no call
// of its own; the key broker releases the pod's keys only while the node's
// evidence still has both. The Binding names the pod's UID, so that it
// never binds another pod of the same name.
//
// The re-judgement is here, right before the Binding, rather than at
// PreBind: a plugin with PreBind work makes kube-scheduler write the pod's
// nominatedNodeName first, one more request per protected pod on the
// client that binds. A pod that is not protected, or was allowed without
// evidence (none exists, e.g. a node in no pool under confinement Any), is
// left to the default binder: it records nothing.
func (pl *Enforcement) Bind(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	st, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !st.id.protected {
		return fwk.NewStatus(fwk.Skip)
	}
	state, status := pl.confirm(ctx, pod, st, nodeName)
	if !status.IsSuccess() {
		return status
	}
	if state == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	record := state.Spec.BoundEvidence()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			Annotations: map[string]string{guard.AnnotationBoundEvidence: record}},
		Target: corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	// As the default binder sends it: through the API cacher when the
	// scheduler has one.
	if c := pl.handle.APICacher(); c != nil {
		var onFinish <-chan error
		if onFinish, err = c.BindPod(binding); err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
	} else {
		err = pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	}
	evidenceRecordsTotal.WithLabelValues(callResult(err)).Inc()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s to node %s with the evidence it was judged on (%s): %w",
			pod.Namespace, pod.Name, nodeName, record, err))
	}
	return nil
}
