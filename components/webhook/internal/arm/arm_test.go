package arm

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/xila-guard/xila-guard/components/api/testcert"
)

const (
	ns  = "xila-guard-system"
	svc = "xila-guard-webhook"
)

// server is a webhook that answers with answer, over TLS with a
// certificate for the Service's name signed by ca.
func server(t *testing.T, ca *testcert.CA, answer func(w http.ResponseWriter, r *admissionv1.AdmissionReview)) *httptest.Server {
	t.Helper()
	certFile, keyFile, err := ca.WriteServingFor(t.TempDir(), 2, svc+"."+ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var r admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &r); err != nil || r.Request == nil || req.URL.Path != "/validate-pods" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		answer(w, &r)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func allow(w http.ResponseWriter, r *admissionv1.AdmissionReview) {
	r.Response = &admissionv1.AdmissionResponse{UID: r.Request.UID, Allowed: true}
	r.Request = nil
	_ = json.NewEncoder(w).Encode(r)
}

// configurations are two chart configurations created unarmed, with the
// CA bundle of ca.
func configurations(ca *testcert.CA) []*admissionregistrationv1.ValidatingWebhookConfiguration {
	ignore := admissionregistrationv1.Ignore
	path := "/validate-pods"
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, FailurePolicy: &ignore,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.PEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc, Path: &path}}}
	}
	return []*admissionregistrationv1.ValidatingWebhookConfiguration{
		{ObjectMeta: metav1.ObjectMeta{Name: "xila-guard-pods"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("pods.webhook.guard.xila.us"), hook("node-pods.webhook.guard.xila.us")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "xila-guard-bindings"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("bindings.webhook.guard.xila.us")}},
	}
}

// policies returns the failurePolicy of every webhook, by name.
func policies(t *testing.T, kube *fake.Clientset) map[string]string {
	t.Helper()
	list, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		for _, w := range c.Webhooks {
			p := "<nil>"
			if w.FailurePolicy != nil {
				p = string(*w.FailurePolicy)
			}
			out[w.Name] = p
		}
	}
	return out
}

func TestArm(t *testing.T) {
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		ca       *testcert.CA // of the server's certificate
		answer   func(http.ResponseWriter, *admissionv1.AdmissionReview)
		answered bool
	}{
		{"a replica answers: armed", ca, allow, true},
		{"the webhook errors: armed all the same, and reported", ca, func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}, false},
		{"an answer for another request does not count", ca, func(w http.ResponseWriter, r *admissionv1.AdmissionReview) {
			r.Request.UID = "other"
			allow(w, r)
		}, false},
		{"a server the CA bundle does not vouch for does not count", other, allow, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := server(t, c.ca, c.answer)
			kube := fake.NewClientset()
			for _, cfg := range configurations(ca) {
				if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			err := Run(context.Background(), kube, Options{Validating: []string{"xila-guard-pods", "xila-guard-bindings"},
				Timeout: 1500 * time.Millisecond, Interval: 100 * time.Millisecond, Dial: strings.TrimPrefix(s.URL, "https://")},
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			if c.answered && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !c.answered && !errors.Is(err, ErrNotAnswering) {
				t.Fatalf("Run = %v, want ErrNotAnswering", err)
			}
			if !c.answered && time.Since(start) < time.Second {
				t.Errorf("gave up after %s, before the timeout", time.Since(start))
			}
			for name, p := range policies(t, kube) {
				if p != "Fail" {
					t.Errorf("webhook %s failurePolicy %s, want Fail", name, p)
				}
			}
		})
	}
}

func TestArmWaitsForTheCABundle(t *testing.T) {
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	s := server(t, ca, allow)
	cfgs := configurations(ca)
	for i := range cfgs[0].Webhooks {
		cfgs[0].Webhooks[i].ClientConfig.CABundle = nil
	}
	kube := fake.NewClientset(cfgs[0])
	go func() {
		// cert-manager injects the bundle a little later.
		time.Sleep(300 * time.Millisecond)
		c := configurations(ca)[0]
		if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(context.Background(), c, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	if err := Run(context.Background(), kube, Options{Validating: []string{"xila-guard-pods"}, Timeout: 5 * time.Second,
		Interval: 100 * time.Millisecond, Dial: strings.TrimPrefix(s.URL, "https://")}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if p := policies(t, kube); p["pods.webhook.guard.xila.us"] != "Fail" {
		t.Errorf("policies %v", p)
	}
}

func TestArmMissingConfiguration(t *testing.T) {
	kube := fake.NewClientset()
	err := Run(context.Background(), kube, Options{Validating: []string{"xila-guard-pods"}, Timeout: 200 * time.Millisecond, Interval: 50 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "xila-guard-pods") {
		t.Fatalf("Run = %v, want an error naming the missing configuration", err)
	}
}

// A mutating configuration alone is probed through its own webhook and
// armed; a webhook already at Fail is left as it is, and the probe names
// no account.
func TestArmMutating(t *testing.T) {
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	var user string
	s := server(t, ca, func(w http.ResponseWriter, r *admissionv1.AdmissionReview) {
		user = r.Request.UserInfo.Username
		allow(w, r)
	})
	ignore, fail := admissionregistrationv1.Ignore, admissionregistrationv1.Fail
	path := "/validate-pods"
	hook := func(name string, p *admissionregistrationv1.FailurePolicyType) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name, FailurePolicy: p,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.PEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc, Path: &path}}}
	}
	kube := fake.NewClientset(&admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-guard-defaults"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{hook("defaults.webhook.guard.xila.us", &ignore), hook("armed.webhook.guard.xila.us", &fail), hook("unset.webhook.guard.xila.us", nil)},
	})
	err = Run(context.Background(), kube, Options{Mutating: []string{"acme-guard-defaults"},
		Timeout: 1500 * time.Millisecond, Interval: 100 * time.Millisecond, Dial: strings.TrimPrefix(s.URL, "https://")},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "acme-guard-defaults", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != fail {
			t.Errorf("webhook %s failurePolicy %v after arm, want Fail", w.Name, w.FailurePolicy)
		}
	}
	if user != ProbeUser || strings.HasPrefix(user, "system:serviceaccount:") {
		t.Errorf("the probe named the user %q, want %q", user, ProbeUser)
	}
	if err := Run(context.Background(), kube, Options{Mutating: []string{"missing"}, Timeout: 300 * time.Millisecond, Interval: 100 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "MutatingWebhookConfiguration missing") {
		t.Errorf("arming a missing mutating configuration: %v, want the configuration named", err)
	}
}
