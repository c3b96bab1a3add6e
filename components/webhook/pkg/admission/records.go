package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// recordBinding answers RecordsPath: a binding by one of the record
// binders (an orchestrator integration's binder) gets the annotation
// guard.AnnotationBoundEvidence, "<node UID>/<incarnation>" of the target
// node's evidence, which the API server copies onto the pod. It is the
// record the controlled scheduler writes at PreBind, and the key broker
// releases a pod's keys only while the node's evidence still matches it.
// The record is the webhook's, never the binder's: a binding that already
// carries one is refused. The validating judgement of the binding then
// checks that the record is the evidence it judged (recordViolation), and
// the chart's policy xila-guard-bound-evidence lets only the record
// binders' bindings, besides the scheduler, carry it.
func (v *Validator) recordBinding(_ context.Context, req *admissionv1.AdmissionRequest) outcome {
	if !isBinding(req) || req.Operation != admissionv1.Create {
		return unexpected("request", "this endpoint records the evidence of pods/binding and bindings CREATE, got %s %s", req.Operation, resourceString(req))
	}
	b := &corev1.Binding{}
	if err := decode(req.Object.Raw, b, "Binding"); err != nil {
		return unexpected("binding", "%v", err)
	}
	subject := fmt.Sprintf("binding of pod %s/%s to node %s by %s", req.Namespace, b.Name, b.Target.Name, req.UserInfo.Username)
	if rec, ok := b.Annotations[guard.AnnotationBoundEvidence]; ok {
		return deny(subject, violation{RuleRecord, guard.ReasonBoundEvidenceReserved, "metadata.annotations",
			fmt.Sprintf("the binding carries %s=%q; the webhook records the evidence a binding is judged on, no binder supplies it", guard.AnnotationBoundEvidence, rec)})
	}
	if !slices.Contains(v.cfg.RecordBinders, req.UserInfo.Username) {
		return outcome{}
	}
	st, ok := v.cfg.Cluster.State(b.Target.Name)
	if !ok {
		// No evidence, no record: the validating judgement decides the
		// binding, and the key broker refuses a pod without a record.
		return outcome{}
	}
	var ops []jsonPatchOp
	if b.Annotations == nil {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{}})
	}
	key := strings.ReplaceAll(strings.ReplaceAll(guard.AnnotationBoundEvidence, "~", "~0"), "/", "~1")
	ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + key, Value: st.BoundEvidence()})
	return outcome{patch: ops}
}

// recordViolation checks the evidence record a binding carries, if any:
// only the record of the target node's current evidence, which the
// judgement reads, may be copied onto the pod.
func (v *Validator) recordViolation(b *corev1.Binding) (violation, bool) {
	rec, ok := b.Annotations[guard.AnnotationBoundEvidence]
	if !ok {
		return violation{}, false
	}
	want := "none: the node has no evidence"
	if st, ok := v.cfg.Cluster.State(b.Target.Name); ok {
		if want = st.BoundEvidence(); rec == want {
			return violation{}, false
		}
	}
	return violation{RuleRecord, guard.ReasonBoundEvidenceReserved, "metadata.annotations",
		fmt.Sprintf("the binding records evidence %q of node %s, whose evidence is %s", rec, b.Target.Name, want)}, true
}
