package enforcement

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// recordEvidence writes, once PreBind has allowed the pod on the node, the
// evidence it was judged on into the pod's annotation
// guard.AnnotationBoundEvidence: the judged node UID and the incarnation
// of the NodeSecurityState the allow was decided on. The key broker
// releases the pod's keys only while the node's evidence still has both.
// A node allowed without evidence (none exists, e.g. a node in no pool
// under confinement Any) records nothing, and loses any record an earlier
// attempt to bind the pod elsewhere left. The patch names the pod's UID,
// so that it never lands on another pod of the same name. A failed write
// fails PreBind: the scheduler retries the pod, and a pod judged on
// evidence is never bound without its record.
func (pl *Enforcement) recordEvidence(ctx context.Context, pod *corev1.Pod, nodeName string, state *v1alpha1.NodeSecurityState) *fwk.Status {
	var value *string
	if state != nil {
		v := state.Spec.BoundEvidence()
		value = &v
	} else if _, ok := pod.Annotations[guard.AnnotationBoundEvidence]; !ok {
		return nil
	}
	// A JSON merge patch: a null value removes the annotation.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID,
		"annotations": map[string]*string{guard.AnnotationBoundEvidence: value},
	}})
	if err != nil {
		return fwk.AsStatus(err)
	}
	_, err = pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
	evidenceRecordsTotal.WithLabelValues(callResult(err)).Inc()
	switch {
	case err == nil:
		return nil
	case value == nil:
		return fwk.AsStatus(fmt.Errorf("removing from pod %s/%s the evidence an earlier attempt to bind it recorded, before binding it to node %s: %w",
			pod.Namespace, pod.Name, nodeName, err))
	default:
		return fwk.AsStatus(fmt.Errorf("recording on pod %s/%s the evidence of node %s it was judged on (%s): %w",
			pod.Namespace, pod.Name, nodeName, *value, err))
	}
}
