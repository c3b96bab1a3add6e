package charts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func decodeB64(t *testing.T, v any) string {
	t.Helper()
	s, _ := v.(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decoding base64 %.20q: %v", s, err)
	}
	return string(b)
}

func parseCert(t *testing.T, pemText string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		t.Fatalf("no PEM block in %.40q", pemText)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeneratedTLS: in mode generate the serving certificate verifies
// against the CA that every webhook configuration carries, for every name
// of the Service.
func TestGeneratedTLS(t *testing.T) {
	vals := readValues(t, "enforcement-integrations")
	vals["webhook"] = map[string]any{"enabled": true, "tls": map[string]any{"mode": "generate"}}
	objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	secret := find(t, objs, "Secret", "xila-guard-webhook-tls")
	caPEM := decodeB64(t, field(secret.raw, "data", "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, caPEM))
	cert := parseCert(t, decodeB64(t, field(secret.raw, "data", "tls.crt")))
	for _, dns := range []string{"xila-guard-webhook.xila-guard-system.svc", "xila-guard-webhook.xila-guard-system.svc.cluster.local"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: dns, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", dns, err)
		}
	}
	if left := time.Until(cert.NotAfter); left < 365*24*time.Hour {
		t.Errorf("serving certificate expires in %v", left)
	}
	// ECDSA P-256, and the key is the certificate's: the API server opens
	// a connection with a full handshake for every call beyond its idle
	// pool, and an RSA signature costs it several times over.
	pair, err := tls.X509KeyPair([]byte(decodeB64(t, field(secret.raw, "data", "tls.crt"))), []byte(decodeB64(t, field(secret.raw, "data", "tls.key"))))
	if err != nil {
		t.Fatalf("the Secret's certificate and key: %v", err)
	}
	if k, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("serving key %T, want ECDSA P-256", pair.PrivateKey)
	}
	n := 0
	for _, o := range objs {
		if o.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for _, h := range field(o.raw, "webhooks").([]any) {
			n++
			if got := decodeB64(t, field(h, "clientConfig", "caBundle")); got != caPEM {
				t.Errorf("%s carries another CA than the Secret's", o)
			}
		}
	}
	if n != 8 {
		t.Errorf("%d webhooks, want 8", n)
	}
}

// lookupSecret serves one Secret to the chart's lookup calls.
type lookupSecret struct{ client dynamic.Interface }

func (l lookupSecret) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return l.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

// TestGeneratedTLSKeptOnUpgrade: when the release's Secret exists, an
// upgrade renders the same CA and certificate instead of new ones.
func TestGeneratedTLSKeptOnUpgrade(t *testing.T) {
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "xila-guard-webhook-tls", "namespace": releaseNS},
		"data": map[string]any{
			"ca.crt":  base64.StdEncoding.EncodeToString([]byte("ca-pem")),
			"tls.crt": base64.StdEncoding.EncodeToString([]byte("cert-pem")),
			"tls.key": base64.StdEncoding.EncodeToString([]byte("key-pem")),
		},
	}}
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), existing)
	if _, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(releaseNS).
		Get(context.Background(), "xila-guard-webhook-tls", metav1.GetOptions{}); err != nil {
		t.Fatalf("fake client: %v", err)
	}
	ch := loadChart(t)
	vals, err := chartutil.ToRenderValues(ch, map[string]any{"webhook": map[string]any{"enabled": true}},
		chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNS, IsUpgrade: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.RenderWithClientProvider(ch, vals, lookupSecret{client})
	if err != nil {
		t.Fatal(err)
	}
	secret := find(t, objects(t, files["xila-guard/templates/webhook-tls.yaml"]), "Secret", "xila-guard-webhook-tls")
	for key, want := range map[string]string{"ca.crt": "ca-pem", "tls.crt": "cert-pem", "tls.key": "key-pem"} {
		if got := decodeB64(t, field(secret.raw, "data", key)); got != want {
			t.Errorf("%s = %q, want the existing %q", key, got, want)
		}
	}
	vwc := find(t, objects(t, files["xila-guard/templates/webhook-configurations.yaml"]), "ValidatingWebhookConfiguration", "xila-guard-pods")
	if got := decodeB64(t, field(vwc.raw, "webhooks", 0, "clientConfig", "caBundle")); got != "ca-pem" {
		t.Errorf("caBundle %q, want the existing CA", got)
	}
}
