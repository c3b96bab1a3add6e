//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestPodNetwork proves the lab cluster's pod network: a pod on one worker
// reaches a pod on the other worker by pod IP and by Service DNS name.
func TestPodNetwork(t *testing.T) {
	const port = 8080
	f := features.New("pod network across workers").
		Setup(createNamespace("net")).
		Assess("pods on different workers reach each other by pod IP and Service name", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cs := clientset(t, cfg)
			ns := namespaceFrom(ctx)
			workers := workerNames(ctx, t, cs)
			if len(workers) < 2 {
				t.Fatalf("need 2 workers, cluster has %v", workers)
			}
			client := netexecPod("client", workers[0], port)
			server := netexecPod("server", workers[1], port)
			for _, p := range []*corev1.Pod{client, server} {
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating pod %s: %v", p.Name, err)
				}
			}
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "server"},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "server"},
					Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(port)}},
				},
			}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating service: %v", err)
			}
			serverIP := waitRunning(ctx, t, cs, ns, "server").Status.PodIP
			waitRunning(ctx, t, cs, ns, "client")

			for _, target := range []struct {
				name, host string
				port       int
			}{
				{"pod IP", serverIP, port},
				{"Service DNS name", fmt.Sprintf("server.%s.svc.cluster.local", ns), 80},
			} {
				got := dialFrom(ctx, t, cs, ns, "client", port, target.host, target.port)
				if got != "server" {
					t.Errorf("client on %s dialing %s (%s:%d): got hostname %q, want %q", workers[0], target.name, target.host, target.port, got, "server")
				}
			}
			return ctx
		}).
		Teardown(deleteNamespace()).
		Feature()
	testenv.Test(t, f)
}

// netexecPod is an agnhost netexec server pinned to a node.
func netexecPod(name, node string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{
				Name:            "netexec",
				Image:           suite.Agnhost,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"netexec", fmt.Sprintf("--http-port=%d", port)},
				Ports:           []corev1.ContainerPort{{ContainerPort: port}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)},
				}},
			}},
		},
	}
}

// dialFrom asks the netexec server in pod `from` (through the API server's
// pod proxy) to fetch /hostname from host:port, retrying while DNS and the
// Service's endpoints settle, and returns the hostname that answered.
func dialFrom(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, from string, fromPort int, host string, port int) string {
	t.Helper()
	params := map[string]string{
		"request": "hostname", "protocol": "http", "host": host,
		"port": fmt.Sprint(port), "tries": "1",
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := cs.CoreV1().Pods(ns).ProxyGet("http", from, fmt.Sprint(fromPort), "/dial", params).DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var out struct {
			Responses []string `json:"responses"`
			Errors    []string `json:"errors"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			last = fmt.Sprintf("undecodable /dial answer %q", body)
			return false, nil
		}
		if len(out.Responses) == 1 {
			last = out.Responses[0]
			return true, nil
		}
		last = fmt.Sprintf("errors %v", out.Errors)
		return false, nil
	})
	if err != nil {
		t.Fatalf("dialing %s:%d from %s: %v (last: %s)", host, port, from, err, last)
	}
	return last
}
