//go:build e2e && volcano

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

var volcanoJobs = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}

// TestRealVolcano installs real Volcano from VOLCANO_MANIFEST (make
// e2e-volcano) next to the chart with the Volcano profile, and runs two
// Volcano Jobs in a tenant's namespace: a compliant one, whose pod Volcano
// schedules and binds, and a privileged one, whose pod the webhook refuses.
func TestRealVolcano(t *testing.T) {
	manifest := os.Getenv("VOLCANO_MANIFEST")
	if manifest == "" {
		t.Fatal("VOLCANO_MANIFEST is not set: run make e2e-volcano")
	}
	f := features.New("real Volcano").
		Setup(setUpLab(func(l *lab.Lab) (map[string]any, error) {
			in, err := l.Profile("volcano")
			if err != nil {
				return nil, err
			}
			return lab.Merge(l.Values("lab"), map[string]any{"orchestratorIntegrations": []any{in}}), nil
		})).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "apply", "--server-side", "-f", manifest)
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
				"-n", "volcano-system", "rollout", "status", "deployment/volcano-scheduler", "deployment/volcano-controllers", "deployment/volcano-admission", "--timeout=5m")
			return ctx
		}).
		Assess("compliant job: its pod is admitted and bound by volcano; privileged job: refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns := l.Tenant.Name
			for _, job := range []struct {
				name       string
				privileged bool
			}{{"compliant", false}, {"privileged", true}} {
				container := map[string]any{"name": "pause", "image": suite.Agnhost, "imagePullPolicy": "Never", "args": []any{"pause"}}
				if job.privileged {
					container["securityContext"] = map[string]any{"privileged": true}
				}
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": map[string]any{"name": job.name},
					"spec": map[string]any{"schedulerName": "volcano", "minAvailable": 1, "tasks": []any{map[string]any{
						"name": "worker", "replicas": 1,
						"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{container}}},
					}}},
				}}
				if _, err := l.Dyn.Resource(volcanoJobs).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating Volcano job %s: %v", job.name, err)
				}
			}
			var pod *corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				pods, err := l.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "volcano.sh/job-name=compliant"})
				if err != nil || len(pods.Items) == 0 {
					return false, nil
				}
				pod = &pods.Items[0]
				return pod.Spec.NodeName != "", nil
			})
			if err != nil {
				t.Errorf("the compliant job's pod was not bound by volcano: %v (status: %s)", err, lab.DescribeStatus(pod))
			}
			pods, err := l.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "volcano.sh/job-name=privileged"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 0 {
				t.Errorf("the privileged job has pod %s; want the webhook to refuse it", pods.Items[0].Name)
			}
			events, err := l.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, e := range events.Items {
				if strings.Contains(e.Message, "PRIVILEGED_CONTAINER") {
					return ctx
				}
				seen = append(seen, fmt.Sprintf("%s: %s", e.Reason, e.Message))
			}
			t.Errorf("no event reports the webhook's PRIVILEGED_CONTAINER refusal; events: %v", seen)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ctx = tearDownLab(ctx, t, cfg)
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "delete", "--ignore-not-found", "-f", manifest)
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
