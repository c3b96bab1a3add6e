package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPodsHandler measures one review through the handler, from body
// to response, with an in-memory cluster and an evaluator that answers at
// once: the webhook's own cost, without the network and the evaluator.
func BenchmarkPodsHandler(b *testing.B) {
	t := &testing.T{}
	for _, bc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"allowed-protected", makePod(tenantNS).obj()},
		{"allowed-plain", makePod(plainNS).obj()},
		{"denied-privileged", makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.Containers[0].SecurityContext = privileged() }).obj()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
			h := v.PodsHandler()
			body, _ := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request:  request(t, "pods", "", admissionv1.Create, bc.pod.Namespace, "u", bc.pod, nil),
			})
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, PodsPath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Body.String())
				}
			}
		})
	}
}
