package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

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

// BenchmarkBindingJudgement measures one pods/binding review through the
// handler: a protected pod bound by an external binder to a compliant pool
// node, judged for that node by the in-process evaluator, next to a plain
// pod bound by the default scheduler to a plain node, which is not judged.
// Rounds of the two alternate, and each reports the p50 and p99 of single
// reviews besides the mean, so that the added cost per binding is their
// difference on one machine at one time.
func BenchmarkBindingJudgement(b *testing.B) {
	t := &testing.T{}
	v := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
	h := v.BindingsHandler()
	review := func(ns, user, node string) []byte {
		body, _ := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  request(t, "pods", "binding", admissionv1.Create, ns, user, binding(ns, node), nil),
		})
		return body
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"judged-protected", review(tenantNS, volcano, poolNode)},
		{"unjudged-plain", review(plainNS, "system:kube-scheduler", plainNode)},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			var lat []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				r := httptest.NewRequest(http.MethodPost, BindingsPath, bytes.NewReader(bc.body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				lat = append(lat, time.Since(start))
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatal(w.Body.String())
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
