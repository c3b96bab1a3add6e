package arm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/xila-guard/xila-guard/components/api/testcert"
)

func TestCheck(t *testing.T) {
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	health := func(w http.ResponseWriter, r *http.Request) {
		if !ready || r.URL.Path != "/readyz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
	core := httptest.NewServer(http.HandlerFunc(health))
	defer core.Close()
	sched := httptest.NewTLSServer(http.HandlerFunc(health))
	defer sched.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(sched.URL, "https://"))
	p, _ := strconv.Atoi(port)

	// The webhook is reached at its Service's name, which does not
	// resolve here: its probe fails, and Check says which.
	cfg := configurations(ca)[0]
	kube := fake.NewClientset(cfg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "xila-guard-scheduler-0",
		Labels: map[string]string{"app.kubernetes.io/name": "xila-guard-scheduler"}}, Status: corev1.PodStatus{PodIP: host}})
	o := CheckOptions{Validating: cfg.Name, CoreURL: core.URL, SchedulerNamespace: ns, Timeout: 1500 * time.Millisecond,
		SchedulerSelector: "app.kubernetes.io/name=xila-guard-scheduler", SchedulerPort: p}
	results, err := Check(context.Background(), kube, o)
	if err == nil || len(results) != 3 || results[0].Err == nil || results[1].Err != nil || results[2].Err != nil {
		t.Fatalf("Check = %v, %+v; want the webhook's probe failed, the evaluator and the scheduler ready", err, results)
	}

	o.Validating = ""
	if _, err := Check(context.Background(), kube, o); err != nil {
		t.Fatalf("Check without the webhook: %v", err)
	}
	ready = false
	results, err = Check(context.Background(), kube, o)
	if err == nil || !strings.Contains(err.Error(), "2 of 2") || !strings.Contains(results[0].Err.Error(), "503") {
		t.Fatalf("Check of unready components = %v, %+v", err, results)
	}
	o.SchedulerSelector = "app.kubernetes.io/name=nothing"
	if _, err := Check(context.Background(), kube, o); err == nil || !strings.Contains(err.Error(), "controlled scheduler") {
		t.Fatalf("Check with no scheduler pod = %v", err)
	}
}
