package admission

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func binding(ns, node string) *corev1.Binding {
	return &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
}

func TestBindingRules(t *testing.T) {
	cases := []struct {
		name     string
		resource string
		sub      string
		op       admissionv1.Operation
		user     string
		ns, node string
		// pod is the pod bound, when not the fake cluster's.
		pod  *corev1.Pod
		want guard.Reason
	}{
		{name: "controlled scheduler binds a protected pod to a compliant node", user: scheduler, ns: tenantNS, node: poolNode},
		{name: "a trusted DaemonSet account binds nothing", user: infraSA, ns: tenantNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "external binder binds a protected pod to a compliant node", user: volcano, ns: tenantNS, node: poolNode},
		{name: "external binder binds a protected pod to a time-sliced node", user: volcano, ns: tenantNS, node: sharedGPU, want: guard.ReasonTimeSlicingForbidden},
		{name: "controlled scheduler binds a protected pod to a time-sliced node", user: scheduler, ns: tenantNS, node: sharedGPU, want: guard.ReasonTimeSlicingForbidden},
		{name: "external binder binds a protected pod to another tenant's node", user: volcano, ns: tenantNS, node: betaNode, want: guard.ReasonTenantMismatch},
		{name: "external binder binds a protected pod to a general node under confinement Pool", user: volcano, ns: tenantNS, node: plainNode, want: guard.ReasonOutsidePool},
		{name: "external binder binds a protected pod to a node offering a replica of a shared GPU its evidence calls exclusive", user: volcano, ns: tenantNS, node: replicaNode, want: guard.ReasonEvidenceIncomplete},
		{name: "external binder binds a protected pod to a node offering GPUs by a passthrough name its evidence does not count", user: volcano, ns: tenantNS, node: passthroughNode, want: guard.ReasonEvidenceIncomplete},
		{name: "external binder binds a protected pod to an unknown node", user: volcano, ns: tenantNS, node: "ghost", want: guard.ReasonNodeUnknown},
		{name: "external binder binds a pod of no tenant to a pool node", user: volcano, ns: plainNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "external binder binds an infrastructure DaemonSet pod to a pool node", user: volcano, ns: "gpu-operator", node: poolNode},
		{name: "external binder binds a pod of a trusted account that is no DaemonSet's to a pool node", user: volcano, ns: "gpu-operator", node: betaNode,
			pod: makePod("gpu-operator").sa("device-plugin").obj(), want: guard.ReasonBindingNotAllowed},
		{name: "external binder binds an unresolved tenant's pod", user: volcano, ns: "orphaned", node: poolNode, want: guard.ReasonTenantUnresolved},
		{name: "report-only binder binds a protected pod to a time-sliced node", user: reporter, ns: tenantNS, node: sharedGPU},
		{name: "a privileged pod of a listed namespace without the tenant label is judged at bind time", user: scheduler, ns: unlabelledNS, node: poolNode, want: guard.ReasonPrivilegedContainer},
		{name: "a binding by no binder is refused even where a report-only binder's would pass", user: "system:kube-scheduler", ns: tenantNS, node: sharedGPU, want: guard.ReasonBindingNotAllowed},
		{name: "default scheduler binds a protected pod", user: "system:kube-scheduler", ns: tenantNS, node: plainNode, want: guard.ReasonBindingNotAllowed},
		{name: "tenant binds its own pod", user: "system:serviceaccount:acme-ml:default", ns: tenantNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "default scheduler binds a plain pod to a plain node", user: "system:kube-scheduler", ns: plainNS, node: plainNode},
		{name: "default scheduler binds a plain pod to a pool node", user: "system:kube-scheduler", ns: plainNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "controlled scheduler binds a plain pod to a pool node", user: scheduler, ns: plainNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "binding to an unknown node", user: "system:kube-scheduler", ns: plainNS, node: "ghost", want: guard.ReasonNodeUnknown},
		{name: "legacy bindings resource", resource: "bindings", user: "admin", ns: tenantNS, node: poolNode, want: guard.ReasonBindingNotAllowed},
		{name: "legacy bindings resource to a plain node", resource: "bindings", user: "admin", ns: plainNS, node: plainNode},
		{name: "binding UPDATE is not judged", op: admissionv1.Update, user: scheduler, ns: plainNS, node: plainNode, want: guard.ReasonUnexpectedRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster()
			if tc.pod != nil {
				c.pods[tc.ns+"/p"] = tc.pod
			}
			v := newValidator(t, c, &fakeEvaluator{verdict: allowVerdict()})
			resource, sub, op := tc.resource, tc.sub, tc.op
			if resource == "" {
				resource, sub = "pods", "binding"
			}
			if op == "" {
				op = admissionv1.Create
			}
			for _, h := range []http.Handler{v.BindingsHandler(), v.PodsHandler()} {
				resp := post(t, h, request(t, resource, sub, op, tc.ns, tc.user, binding(tc.ns, tc.node), nil))
				got := codes(resp)
				if tc.want == "" && !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result)
				}
				if tc.want != "" && (resp.Allowed || !slices.Equal(got, []string{string(tc.want)})) {
					t.Fatalf("allowed=%v codes=%v, want %s", resp.Allowed, got, tc.want)
				}
			}
		})
	}
}

func node(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: poolNode, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

func TestNodeRules(t *testing.T) {
	taint := corev1.Taint{Key: pool, Value: "acme", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: pool, Value: "beta", Effect: corev1.TaintEffectNoSchedule}
	inPool := map[string]string{pool: "acme", "zone": "a"}
	cases := []struct {
		name      string
		old, now  *corev1.Node
		tenantPod bool
		// sub is the subresource: "" or "status", which takes labels.
		sub  string
		want guard.Reason
	}{
		{name: "unrelated change with tenant pods", old: node(inPool, taint), now: node(map[string]string{pool: "acme", "zone": "b"}, taint), tenantPod: true},
		{name: "label removed with tenant pods", old: node(inPool, taint), now: node(map[string]string{"zone": "a"}, taint), tenantPod: true, want: guard.ReasonPoolMembershipLocked},
		{name: "label changed with tenant pods", old: node(inPool, taint), now: node(map[string]string{pool: "beta"}, taint), tenantPod: true, want: guard.ReasonPoolMembershipLocked},
		{name: "taint removed with tenant pods", old: node(inPool, taint), now: node(inPool), tenantPod: true, want: guard.ReasonPoolMembershipLocked},
		{name: "taint changed with tenant pods", old: node(inPool, taint), now: node(inPool, other), tenantPod: true, want: guard.ReasonPoolMembershipLocked},
		{name: "taint added with tenant pods", old: node(inPool), now: node(inPool, taint), tenantPod: true},
		{name: "label added with tenant pods", old: node(nil), now: node(inPool), tenantPod: true},
		{name: "label removed without tenant pods", old: node(inPool, taint), now: node(nil)},
		{name: "label removed through status with tenant pods", old: node(inPool, taint), now: node(map[string]string{"zone": "a"}, taint), tenantPod: true, sub: "status", want: guard.ReasonPoolMembershipLocked},
		{name: "status update with tenant pods", old: node(inPool, taint), now: node(inPool, taint), tenantPod: true, sub: "status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster()
			if !tc.tenantPod {
				c.podsOn = nil
			}
			v := newValidator(t, c, &fakeEvaluator{})
			resp := post(t, v.NodesHandler(), request(t, "nodes", tc.sub, admissionv1.Update, "", "admin", tc.now, tc.old))
			got := codes(resp)
			if tc.want == "" && !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			if tc.want != "" {
				if resp.Allowed || !slices.Equal(got, []string{string(tc.want)}) {
					t.Fatalf("allowed=%v codes=%v, want %s", resp.Allowed, got, tc.want)
				}
				if !strings.Contains(resp.Result.Message, tenantNS+"/train-0") {
					t.Errorf("message %q does not name the tenant pod", resp.Result.Message)
				}
			}
		})
	}
}

func TestWrongKind(t *testing.T) {
	v := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
	pod := makePod(plainNS).obj()
	cases := []struct {
		name string
		h    http.Handler
		req  *admissionv1.AdmissionRequest
	}{
		{"node to the pods path", v.PodsHandler(), request(t, "nodes", "", admissionv1.Update, "", "u", node(nil), node(nil))},
		{"pod to the nodes path", v.NodesHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", pod, nil)},
		{"pod to the bindings path", v.BindingsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", pod, nil)},
		{"node object as a pod", v.PodsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", node(nil), nil)},
		{"pods/log", v.PodsHandler(), request(t, "pods", "log", admissionv1.Update, plainNS, "u", pod, pod)},
		{"pod DELETE", v.PodsHandler(), request(t, "pods", "", admissionv1.Delete, plainNS, "u", nil, pod)},
		{"no object", v.PodsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", nil, nil)},
		{"update without old object", v.PodsHandler(), request(t, "pods", "", admissionv1.Update, plainNS, "u", pod, nil)},
		{"node CREATE", v.NodesHandler(), request(t, "nodes", "", admissionv1.Create, "", "u", node(nil), nil)},
		{"nodes/proxy", v.NodesHandler(), request(t, "nodes", "proxy", admissionv1.Update, "", "u", node(nil), node(nil))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, tc.h, tc.req)
			if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonUnexpectedRequest)}) {
				t.Fatalf("allowed=%v codes=%v, want UNEXPECTED_REQUEST", resp.Allowed, got)
			}
		})
	}
}

func TestMalformedReview(t *testing.T) {
	v := newValidator(t, newFakeCluster(), &fakeEvaluator{})
	cases := []struct {
		name, method, contentType, body string
		status                          int
		text                            string
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed, "POST"},
		{"text body", http.MethodPost, "text/plain", "{}", http.StatusUnsupportedMediaType, "application/json"},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest, "not an AdmissionReview"},
		{"v1beta1", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`, http.StatusBadRequest, "admission.k8s.io/v1"},
		{"wrong kind", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`, http.StatusBadRequest, "want admission.k8s.io/v1 AdmissionReview"},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest, "no request"},
		{"no uid", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, http.StatusBadRequest, "no uid"},
		{"too large", http.MethodPost, "application/json", `{"x":"` + strings.Repeat("a", maxReviewBytes) + `"}`, http.StatusRequestEntityTooLarge, "exceeds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, PodsPath, bytes.NewReader([]byte(tc.body)))
			r.Header.Set("Content-Type", tc.contentType)
			w := httptest.NewRecorder()
			v.PodsHandler().ServeHTTP(w, r)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.text) {
				t.Fatalf("status %d body %q, want %d containing %q", w.Code, w.Body, tc.status, tc.text)
			}
		})
	}
}

func TestParseServiceAccount(t *testing.T) {
	for in, want := range map[string]string{
		"ns:name":                       "system:serviceaccount:ns:name",
		"system:serviceaccount:ns:name": "system:serviceaccount:ns:name",
		" kube-system:daemon-set ":      "system:serviceaccount:kube-system:daemon-set",
		"":                              "",
		"name":                          "",
		":name":                         "",
		"ns:":                           "",
		"a:b:c":                         "",
		"system:serviceaccount:ns":      "",
	} {
		got, err := ParseServiceAccount(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("ParseServiceAccount(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
