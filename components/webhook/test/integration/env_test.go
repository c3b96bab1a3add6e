//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/testcert"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/webhook/internal/app"
)

func guardClient() (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(restCfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitOK(t testing.TB, c *http.Client, url, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := c.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("%s did not become ready at %s: %v", what, url, err)
	}
}

// webhook is one running xila-guard-webhook.
type webhook struct {
	addr, dir string
	ca        *testcert.CA
	client    *http.Client
	cancel    context.CancelFunc
	done      chan error
}

// startWebhook runs the webhook in-process, as its command would, and
// waits until it reports ready (caches synced).
func startWebhook(t testing.TB, extra ...string) *webhook {
	t.Helper()
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	w := &webhook{addr: freeAddr(t), dir: t.TempDir(), ca: ca, done: make(chan error, 1)}
	certFile, keyFile, err := ca.WriteServing(w.dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	args := append([]string{
		"--listen=" + w.addr, "--metrics-listen=", "--kubeconfig=" + kubeconfig,
		"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile, "--tls-check-interval=100ms",
		"--log-level=warn",
		"--scheduler-profile=volcano=volcano.sh/job-name", "--trusted-serviceaccounts=infra:agent",
		"--shutdown-timeout=2s", "--shutdown-delay=0",
		"--binder-serviceaccounts=xila-guard-system:xila-guard-scheduler,volcano-system:volcano-scheduler",
	}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- app.Run(ctx, args, io.Discard, os.Stderr) }()
	t.Cleanup(w.stop)
	waitOK(t, w.client, "https://"+w.addr+"/readyz", "xila-guard-webhook")
	return w
}

// stop shuts the webhook down and waits for it; stopping twice is fine.
func (w *webhook) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	w.cancel = nil
}

// register points a ValidatingWebhookConfiguration with failurePolicy
// Fail at w, for the namespaces sel selects (nil: all) and, with nodes, for
// node updates. It waits until the API server calls the webhook.
func register(t *testing.T, name string, w *webhook, sel *metav1.LabelSelector, nodes bool) {
	t.Helper()
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	hook := func(kind, path string, ops []admissionregistrationv1.OperationType, resources []string, scope admissionregistrationv1.ScopeType, sel *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		url := "https://" + w.addr + path
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    kind + "." + name + ".guard.xila.us",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources, Scope: &scope}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       sel,
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("pods", "/validate-pods", []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				[]string{"pods", "pods/ephemeralcontainers"}, admissionregistrationv1.NamespacedScope, sel),
			hook("bindings", "/validate-bindings", []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				[]string{"pods/binding", "bindings"}, admissionregistrationv1.NamespacedScope, sel),
		},
	}
	if nodes {
		h := hook("nodes", "/validate-nodes", []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			[]string{"nodes", "nodes/status"}, admissionregistrationv1.ClusterScope, nil)
		h.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: guard.LabelTenantPool, Operator: metav1.LabelSelectorOpExists}}}
		h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "pool-membership-changes", Expression: poolChange(t)}}
		cfg.Webhooks = append(cfg.Webhooks, h)
	}
	createConfig(t, cfg)
}

// createConfig creates cfg and deletes it when the test ends.
func createConfig(t *testing.T, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// waitEnforced waits until the API server applies the webhooks to ns: a
// dry-run privileged pod there is refused by xila-guard.
func waitEnforced(t *testing.T, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod(ns).Privileged().Obj(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "xila-guard"), nil
	})
	if err != nil {
		t.Fatalf("the webhook is not called for namespace %s: %v", ns, err)
	}
}

var podSeq atomic.Int64

// pod starts a pod of a fresh name in ns for xila-guard-scheduler.
func pod(ns string) *fixture.PodWrapper {
	return fixture.MakePod(fmt.Sprintf("p-%d", podSeq.Add(1)), ns).Scheduler(guard.SchedulerName)
}

// as returns a client that impersonates user (with full rights, so that
// only the webhook can refuse).
func as(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(restCfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// servingSerial dials w and returns the serial of the certificate it shows.
func servingSerial(t *testing.T, w *webhook) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", w.addr, &tls.Config{RootCAs: w.ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// poolChange is the chart's match condition for the nodes webhook
// (templates/_webhook.tpl, "xila-guard.webhook.poolChange") for the
// default pool label.
func poolChange(t *testing.T) string { return chartCondition(t, "pool-change") }

// chartCondition is a match condition of the chart's webhooks as the
// chart renders it: the chart's tests check that charts/testdata/<name>.cel
// holds exactly its render.
func chartCondition(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "charts", "testdata", name+".cel"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
