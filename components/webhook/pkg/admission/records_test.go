package admission

import (
	"encoding/json"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestRecordBinding(t *testing.T) {
	record := guard.BoundEvidence("uid-"+poolNode, "i1")
	forged := func(b *corev1.Binding) *corev1.Binding {
		b.Annotations = map[string]string{guard.AnnotationBoundEvidence: "uid-elsewhere/i9"}
		return b
	}
	cases := []struct {
		name    string
		user    string
		binding *corev1.Binding
		// want is the record the patch writes, "" for none; refused
		// means the binding is refused.
		want    string
		refused bool
	}{
		{name: "an integration's binder gets the record of the node's evidence", user: volcano, binding: binding(tenantNS, poolNode), want: record},
		{name: "a binder that records nothing here", user: scheduler, binding: binding(tenantNS, poolNode)},
		{name: "a node without evidence gets no record", user: volcano, binding: binding(tenantNS, plainNode)},
		{name: "a binder supplies its own record", user: volcano, binding: forged(binding(tenantNS, poolNode)), refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
			resp := post(t, v.RecordsHandler(), request(t, "pods", "binding", admissionv1.Create, tenantNS, tc.user, tc.binding, nil))
			if resp.Allowed == tc.refused {
				t.Fatalf("allowed=%v, want refused=%v: %v", resp.Allowed, tc.refused, resp.Result)
			}
			if tc.refused {
				if got := codes(resp); !slices.Equal(got, []string{string(guard.ReasonBoundEvidenceReserved)}) {
					t.Errorf("codes %v, want BOUND_EVIDENCE_RESERVED", got)
				}
				return
			}
			var ops []jsonPatchOp
			if len(resp.Patch) > 0 {
				if err := json.Unmarshal(resp.Patch, &ops); err != nil {
					t.Fatal(err)
				}
			}
			got := ""
			for _, op := range ops {
				if op.Path == "/metadata/annotations/guard.xila.us~1bound-evidence" {
					got, _ = op.Value.(string)
				}
			}
			if got != tc.want {
				t.Errorf("recorded %q (patch %s), want %q", got, resp.Patch, tc.want)
			}
		})
	}
}

// TestBindingRecordJudged: the validating judgement lets a binding carry
// only the record of the evidence it judges.
func TestBindingRecordJudged(t *testing.T) {
	for _, tc := range []struct {
		name, record string
		want         guard.Reason
	}{
		{name: "the record of the node's evidence", record: guard.BoundEvidence("uid-"+poolNode, "i1")},
		{name: "another incarnation", record: guard.BoundEvidence("uid-"+poolNode, "i0"), want: guard.ReasonBoundEvidenceReserved},
		{name: "another node's evidence", record: guard.BoundEvidence("uid-"+sharedGPU, "i1"), want: guard.ReasonBoundEvidenceReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
			b := binding(tenantNS, poolNode)
			b.ObjectMeta = metav1.ObjectMeta{Name: "p", Namespace: tenantNS, Annotations: map[string]string{guard.AnnotationBoundEvidence: tc.record}}
			resp := post(t, v.BindingsHandler(), request(t, "pods", "binding", admissionv1.Create, tenantNS, volcano, b, nil))
			if got := codes(resp); resp.Allowed != (tc.want == "") || (tc.want != "" && !slices.Equal(got, []string{string(tc.want)})) {
				t.Errorf("allowed=%v codes=%v, want %q", resp.Allowed, got, tc.want)
			}
		})
	}
}
