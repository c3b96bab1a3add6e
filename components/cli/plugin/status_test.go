package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	labels := map[string]string{"app.kubernetes.io/part-of": "xila-guard"}
	two := int32(2)
	fail := admissionregistrationv1.Fail
	ready := true
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "xila-guard-webhook", Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "webhook", Image: "xila-guard/webhook:v1.2.3"}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "xila-guard-scheduler", Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "s", Image: "registry:5000/xila-guard/scheduler@sha256:abc"}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "acme-guard-pods", Labels: labels}, // fullnameOverride=acme-guard
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "pods.webhook.guard.xila.us", FailurePolicy: &fail,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: DefaultNamespace, Name: "xila-guard-webhook"}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "acme-guard-core",
			Labels: map[string]string{"app.kubernetes.io/part-of": "xila-guard", "app.kubernetes.io/component": "evaluator"}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "xila-guard-webhook-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "xila-guard-webhook"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}},
		&v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{guard.LabelTenantPool: "acme"}},
			Spec:   v1alpha1.NodeSecurityStateSpec{ObservedAt: metav1.NewTime(now.Add(-time.Minute))},
			Status: v1alpha1.NodeSecurityStateStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}},
		&v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2", Labels: map[string]string{guard.LabelTenantPool: "acme"}},
			Spec:   v1alpha1.NodeSecurityStateSpec{ObservedAt: metav1.NewTime(now.Add(-20 * time.Minute))},
			Status: v1alpha1.NodeSecurityStateStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "EvidenceStale"}}}},
		&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "e1"}, Reason: guard.EventReasonPolicyViolation,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "acme-ml", Name: "train-0"}, Note: "deny on gpu-2: TIME_SLICING_FORBIDDEN",
			EventTime: metav1.NewMicroTime(now.Add(-10 * time.Minute))},
		&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-ml", Name: "e2"}, Reason: guard.EventReasonPolicyViolation,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "acme-ml", Name: "old"}, Note: "long ago",
			EventTime: metav1.NewMicroTime(now.Add(-3 * time.Hour))},
		// No status (no observe controller): judged by age.
		&v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "gpu-3", Labels: map[string]string{guard.LabelTenantPool: "globex"}},
			Spec: v1alpha1.NodeSecurityStateSpec{ObservedAt: metav1.NewTime(now.Add(-time.Minute))}},
		&v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "gpu-4", Labels: map[string]string{guard.LabelTenantPool: "globex"}},
			Spec: v1alpha1.NodeSecurityStateSpec{ObservedAt: metav1.NewTime(now.Add(-time.Hour))}},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()
	h, err := Status(context.Background(), c, nil, DefaultNamespace, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if h.OK() {
		t.Error("healthy with a scheduler replica down and stale evidence")
	}
	if len(h.Components) != 2 || h.Components[0].Name != "xila-guard-scheduler" || h.Components[0].OK() ||
		h.Components[0].Versions[0] != "sha256:abc" || h.Components[1].Versions[0] != "v1.2.3" || !h.Components[1].OK() {
		t.Errorf("components %+v", h.Components)
	}
	if len(h.Webhooks) != 1 || h.Webhooks[0].Endpoints != 1 {
		t.Errorf("webhooks %+v", h.Webhooks)
	}
	if h.Probe != "no tenant namespace to probe the pod webhook in" {
		t.Errorf("probe %q: the pod webhook of acme-guard-pods is not recognised", h.Probe)
	}
	if h.Evaluator != "acme-guard-core has no port" || h.EvaluatorOK {
		t.Errorf("evaluator %q (ok %v): want the Service labelled component=evaluator, without a port", h.Evaluator, h.EvaluatorOK)
	}
	if len(h.Pools) != 2 || h.Pools[0].States != 2 || h.Pools[0].Ready != 1 || h.Pools[0].Stale != 1 || h.Pools[0].Oldest != 20*time.Minute || h.Pools[0].Unjudged != 0 {
		t.Errorf("pools %+v", h.Pools)
	}
	if g := h.Pools[1]; g.Pool != "globex" || g.States != 2 || g.Ready != 1 || g.Stale != 1 || g.Unjudged != 2 {
		t.Errorf("pool without status %+v", g)
	}
	if h.Violations.Events != 1 || !strings.Contains(h.Violations.Latest[0], "acme-ml/train-0") || h.Violations.Reports || h.Violations.ReportsError == "" {
		t.Errorf("violations %+v", h.Violations)
	}
	var out bytes.Buffer
	PrintHealth(&out, h)
	for _, want := range []string{"deployment/xila-guard-scheduler  1/2", "NOT READY", "acme    2       1      1", "2 without status, judged by age", "Violations in the last 1h0m0s: 1", "NOT HEALTHY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
