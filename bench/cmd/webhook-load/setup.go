package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/testcert"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// fixedCluster is a cluster held in memory: one tenant namespace, one
// plain namespace, a pool node and a plain node. The informer-backed
// cluster answers the same questions from maps of the same kind.
type fixedCluster struct{}

func (fixedCluster) Synced() bool { return true }
func (fixedCluster) Identity(_ context.Context, ns string) (admission.Identity, error) {
	if ns != "acme-ml" {
		return admission.Identity{}, nil
	}
	return admission.Identity{Protected: true, Tenant: &wire.Tenant{ID: "acme"}, Policy: &wire.Policy{Name: "acme",
		Spec: v1alpha1.PlacementPolicySpec{Confinement: v1alpha1.ConfinementPool,
			Evidence: v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}}}}}, nil
}
func (fixedCluster) Node(name string) (*corev1.Node, bool) {
	if name == "gpu-1" {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{guard.LabelTenantPool: "acme"}}}, true
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, true
}
func (fixedCluster) TenantPodsOn(context.Context, string) ([]string, error) { return nil, nil }
func (fixedCluster) State(string) (*v1alpha1.NodeSecurityStateSpec, bool)   { return nil, false }
func (fixedCluster) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, nil
}

// chartGo is the Go runtime's settings the chart gives the webhook
// (values.yaml: webhook.go).
var chartGo = []string{"GOGC=400", "GOMEMLIMIT=200MiB"}

// collectLikeTheChart gives this process, which serves the webhook, the
// chart's collector settings where the environment sets none, and says
// which settings it runs with.
func collectLikeTheChart(goDefaults bool) string {
	var applied []string
	for _, kv := range chartGo {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case os.Getenv(k) != "":
			applied = append(applied, k+"="+os.Getenv(k)+" (environment)")
			continue
		case goDefaults:
			continue
		case k == "GOGC":
			n, _ := strconv.Atoi(v)
			debug.SetGCPercent(n)
		case k == "GOMEMLIMIT":
			n, _ := strconv.Atoi(strings.TrimSuffix(v, "MiB"))
			debug.SetMemoryLimit(int64(n) << 20)
		}
		applied = append(applied, kv)
	}
	if len(applied) == 0 {
		return "Go's defaults"
	}
	return strings.Join(applied, " ")
}

// servers are the webhook and the baseline on loopback HTTPS.
type servers struct {
	webhook, baseline string
	client            *http.Client
	close             func()
	// conns counts the connections both servers accepted: each is a TLS
	// handshake, which a measurement should not need once warm.
	conns atomic.Int64
}

func startServers() (*servers, error) {
	ca, err := testcert.NewCA()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "webhook-load-")
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := ca.WriteServing(dir, 1)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	ev, err := evaluate.New(evaluate.Options{})
	if err != nil {
		return nil, err
	}
	v, err := admission.New(admission.Config{PoolLabel: guard.LabelTenantPool, Cluster: fixedCluster{}, Evaluator: ev,
		Profile: guard.ProfileProduction})
	if err != nil {
		return nil, err
	}
	constant, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: "x", Allowed: true},
	})
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body as any handler must, then answer a constant.
		buf := make([]byte, 32<<10)
		for {
			if _, err := r.Body.Read(buf); err != nil {
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(constant)
	})
	var closers []func()
	s := &servers{}
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		srv := &http.Server{
			Handler:   h,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.conns.Add(1)
				}
			},
		}
		go func() { _ = srv.Serve(tls.NewListener(ln, srv.TLSConfig)) }()
		closers = append(closers, func() { _ = srv.Close() })
		return "https://" + ln.Addr().String(), nil
	}
	if s.webhook, err = serve(v.PodsHandler()); err != nil {
		return nil, err
	}
	if s.baseline, err = serve(baseline); err != nil {
		return nil, err
	}
	ct := http.DefaultTransport.(*http.Transport).Clone()
	ct.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
	// The API server keeps a pool of connections to each webhook.
	ct.MaxIdleConnsPerHost = 256
	s.client = &http.Client{Transport: ct, Timeout: 10 * time.Second}
	s.close = func() {
		for _, c := range closers {
			c()
		}
	}
	return s, nil
}

// review encodes a CREATE review of pod, as the API server sends it.
func review(pod *corev1.Pod) []byte {
	podRaw, _ := json.Marshal(pod)
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "6e1f6b5c-0d2a-4c3e-9b1e-0d2f3a4b5c6d",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller"},
			Object:   runtime.RawExtension{Raw: podRaw},
		},
	})
	return body
}
