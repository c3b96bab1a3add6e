//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// registerRecords points a MutatingWebhookConfiguration at w's records
// endpoint for the bindings of every namespace, as the chart does for the
// integrations' binders.
func registerRecords(t *testing.T, name string, w *webhook) {
	t.Helper()
	ignore, none := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	never := admissionregistrationv1.NeverReinvocationPolicy
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	url := "https://" + w.addr + "/mutate-bindings-evidence"
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "records." + name + ".guard.xila.us",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding", "bindings"}, Scope: &scope}}},
			FailurePolicy: &ignore, SideEffects: &none, ReinvocationPolicy: &never, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	ctx := context.Background()
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// TestIntegrationBindingRecords: a tenant pod Volcano's binder places gets
// the record of the evidence its binding was judged on, as the controlled
// scheduler writes it, so that the key broker can release its keys; a
// binder that brings a record of its own is refused.
func TestIntegrationBindingRecords(t *testing.T) {
	t.Run("G-BOUND-EVIDENCE Volcano's binding gets the record, a binding with its own is refused", testBindingRecords)
}

func testBindingRecords(t *testing.T) {
	ctx := t.Context()
	const volcano = "system:serviceaccount:volcano-system:volcano-scheduler"
	w := startWebhook(t, "--record-binders="+volcano)
	register(t, "records-judged", w, nil, false)
	registerRecords(t, "records", w)
	waitEnforced(t, tenantNS)
	node, err := kube.CoreV1().Nodes().Get(ctx, poolNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := guard.BoundEvidence(string(node.UID), "i1")
	mk := func() string {
		p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS).Scheduler("volcano").Label("volcano.sh/job-name", "j").Obj(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	// The API server calls the mutating webhook once it has loaded it.
	var got string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		name := mk()
		if err := bind(t, volcano, tenantNS, name, poolNode); err != nil {
			return false, err
		}
		p, err := kube.CoreV1().Pods(tenantNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p.Annotations[guard.AnnotationBoundEvidence]
		return got != "", nil
	})
	if err != nil || got != want {
		t.Fatalf("Volcano's binding recorded %q (%v), want %q", got, err, want)
	}
	forged := mk()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: forged, Namespace: tenantNS, Annotations: map[string]string{guard.AnnotationBoundEvidence: "uid-elsewhere/i9"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: poolNode}}
	err = as(t, volcano).CoreV1().Pods(tenantNS).Bind(ctx, b, metav1.CreateOptions{})
	if err := fixture.RefusedWith(err, guard.ReasonBoundEvidenceReserved); err != nil {
		t.Errorf("Volcano's binding with a record of its own: %v", err)
	}
	if p, err := kube.CoreV1().Pods(tenantNS).Get(ctx, forged, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("the pod whose binding brought its own record: node %q (%v), want it unbound", p.Spec.NodeName, err)
	}
}
