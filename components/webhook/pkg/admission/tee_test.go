package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// TestTEETolerations: the mutating endpoint adds the TEE taint's
// toleration to pods that request an enclave resource (any value) and to
// pods whose tenant's policy asks for TEE types (one per type), to
// nothing else, never twice, and never refuses.
func TestTEETolerations(t *testing.T) {
	const confidentialNS = "confidential"
	exists := corev1.Toleration{Key: guard.TaintTEE, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	equal := func(v string) corev1.Toleration {
		return corev1.Toleration{Key: guard.TaintTEE, Operator: corev1.TolerationOpEqual, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	enclave := func(s *corev1.PodSpec) {
		s.Containers[0].Resources.Limits = corev1.ResourceList{"sgx.intel.com/epc": resource.MustParse("1Mi")}
	}
	other := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}
	for name, c := range map[string]struct {
		ns   string
		op   admissionv1.Operation
		mod  func(*corev1.PodSpec)
		sync bool
		want []corev1.Toleration // the tolerations after the patch
	}{
		"enclave resource in an unprotected namespace": {ns: "default", mod: enclave, want: []corev1.Toleration{exists}},
		"enclave resource of an init container": {ns: "default", mod: func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"sgx.intel.com/enclave": resource.MustParse("1")}}}}
		}, want: []corev1.Toleration{exists}},
		"enclave resource, other tolerations kept": {ns: "default", mod: func(s *corev1.PodSpec) { enclave(s); s.Tolerations = []corev1.Toleration{other} },
			want: []corev1.Toleration{other, exists}},
		"already tolerated": {ns: "default", mod: func(s *corev1.PodSpec) { enclave(s); s.Tolerations = []corev1.Toleration{exists} },
			want: []corev1.Toleration{exists}},
		"policy with TEE types":                        {ns: confidentialNS, want: []corev1.Toleration{equal("SEV-SNP"), equal("TDX")}},
		"policy with TEE types, one already tolerated": {ns: confidentialNS, mod: func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{equal("TDX")} }, want: []corev1.Toleration{equal("TDX"), equal("SEV-SNP")}},
		"policy without TEE types":                     {ns: tenantNS, want: nil},
		"plain pod":                                    {ns: "default", want: nil},
		"update is left alone":                         {ns: "default", mod: enclave, op: admissionv1.Update, want: nil},
		"caches not synced: policy pod unchanged":      {ns: confidentialNS, sync: true, want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			cl := newFakeCluster()
			cl.identities[confidentialNS] = Identity{Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"},
				Policy: &wire.Policy{Name: "cc", Spec: v1alpha1.PlacementPolicySpec{ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
					TEETypes: []v1alpha1.TEEType{v1alpha1.TEESEVSNP, v1alpha1.TEETDX}}}}}
			cl.synced = !c.sync
			v := newValidator(t, cl, &fakeEvaluator{verdict: allowVerdict()})
			b := makePod(c.ns)
			if c.mod != nil {
				b = b.mod(c.mod)
			}
			pod := b.obj()
			op := c.op
			if op == "" {
				op = admissionv1.Create
			}
			var old *corev1.Pod
			if op == admissionv1.Update {
				old = pod
			}
			resp := post(t, v.TEEHandler(), request(t, "pods", "", op, c.ns, "alice", pod, old))
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			got := applyTolerationPatch(t, pod.Spec.Tolerations, resp)
			if c.want == nil {
				if resp.Patch != nil {
					t.Errorf("patched %s, want no patch", resp.Patch)
				}
				return
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
		})
	}
}

// applyTolerationPatch applies the response's JSON patch, which may only
// add tolerations, to the tolerations.
func applyTolerationPatch(t *testing.T, have []corev1.Toleration, resp *admissionv1.AdmissionResponse) []corev1.Toleration {
	t.Helper()
	if resp.Patch == nil {
		return have
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v", resp.PatchType)
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	out := append([]corev1.Toleration(nil), have...)
	for i, op := range ops {
		switch {
		case op.Op == "add" && op.Path == "/spec/tolerations" && i == 0 && len(have) == 0:
			if err := json.Unmarshal(op.Value, &out); err != nil {
				t.Fatal(err)
			}
		case op.Op == "add" && op.Path == "/spec/tolerations/-" && len(out) > 0:
			var tol corev1.Toleration
			if err := json.Unmarshal(op.Value, &tol); err != nil {
				t.Fatal(err)
			}
			out = append(out, tol)
		default:
			t.Fatalf("operation %d %s %s does not apply to %d tolerations", i, op.Op, op.Path, len(out))
		}
	}
	return out
}
