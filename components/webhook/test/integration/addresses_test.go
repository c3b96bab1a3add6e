//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// registerAddresses points the chart's pod-address webhook (pods/status
// UPDATEs in tenant namespaces, sent only when they change a pod's
// addresses, by the chart's own match condition) at w.
func registerAddresses(t *testing.T, w *webhook) {
	t.Helper()
	cond, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "charts", "xila-guard", "policies", "conditions", "pod-addresses.cel"))
	if err != nil {
		t.Fatal(err)
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	url := "https://" + w.addr + "/validate-pods"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "addresses"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "pod-addresses.addresses.guard.xila.us",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status"}, Scope: &scope}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "changes-the-pod-addresses", Expression: strings.TrimSpace(string(cond))}},
		}},
	}
	createConfig(t, cfg)
}

// TestIntegrationPodAddresses: a node writes the status of its own tenant
// pod; it may give it addresses of its own pod range, and not another
// node's pod's address, which would make that pod an endpoint of the
// tenant's Services. Status writes that keep the addresses never reach the
// webhook.
func TestIntegrationPodAddresses(t *testing.T) {
	t.Run("G-POD-ADDRESS a node gives its tenant pod addresses of its own range only", testPodAddresses)
}

func testPodAddresses(t *testing.T) {
	mainWebhook(t)
	w := startWebhook(t)
	registerAddresses(t, w)
	ctx := t.Context()
	const scheduler = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"
	node := poolNodeWith(t, "addr-node", "acme", v1alpha1.SharingExclusive)
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.5.0/24", []string{"10.244.5.0/24"}
	if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("giving %s its pod range: %v", node, err)
	}
	p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS).Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return bind(t, scheduler, tenantNS, p.Name, node) == nil, nil
	}); err != nil {
		t.Fatalf("binding %s to %s: %v", p.Name, node, bind(t, scheduler, tenantNS, p.Name, node))
	}
	kubelet := as(t, "system:node:"+node)
	setIPs := func(ips ...string) error {
		cur, err := kube.CoreV1().Pods(tenantNS).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.PodIP, cur.Status.PodIPs = "", nil
		if len(ips) > 0 {
			cur.Status.PodIP = ips[0]
		}
		for _, ip := range ips {
			cur.Status.PodIPs = append(cur.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		_, err = kubelet.CoreV1().Pods(tenantNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	// The webhook's node cache learns the range within moments.
	var last error
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = setIPs("10.244.6.9")
		return last != nil, nil
	})
	expect(t, "the kubelet gives its tenant pod another node's pod's address", last, guard.ReasonPodAddressOutsideNode)
	expect(t, "the kubelet gives its tenant pod an address of its range", setIPs("10.244.5.9"), "")
	cur, err := kube.CoreV1().Pods(tenantNS).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status.PodIP != "10.244.5.9" {
		t.Errorf("the pod's address is %q, want 10.244.5.9", cur.Status.PodIP)
	}
	// A status write that keeps the addresses is not sent, so it passes
	// with the webhook down.
	w.stop()
	cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: "example.com/probe", Status: corev1.ConditionTrue})
	_, err = kubelet.CoreV1().Pods(tenantNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	expect(t, "a status write that keeps the addresses, webhook down", err, "")
	err = setIPs("10.244.5.10")
	if err == nil || !strings.Contains(err.Error(), "pod-addresses.addresses.guard.xila.us") {
		t.Errorf("a status write that changes the addresses, webhook down: %v, want the webhook's failure", err)
	}
}
