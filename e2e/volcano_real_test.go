//go:build e2e && volcano

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

// Volcano's kinds the test uses.
var (
	volcanoJobs     = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
	volcanoQueues   = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	volcanoCommands = schema.GroupVersionResource{Group: "bus.volcano.sh", Version: "v1alpha1", Resource: "commands"}
)

// TestRealVolcano installs real Volcano from VOLCANO_MANIFEST (make
// e2e-volcano) next to the chart with the Volcano profile, its components
// on the control plane like the platform's (both workers are the tenant's
// pool). The tenant's user, with the tenant role and the profile's
// tenantResources, creates Volcano Jobs in the tenant's namespace whose
// pods tolerate exactly the tenant's pool taint, which the volcano
// scheduler needs to place them on the pool:
//
//   - a compliant Job: Volcano binds its pod, and the webhook admits the
//     binding only onto the compliant worker (the time-sliced one is
//     refused at bind time, and Volcano tries again);
//   - a Job pinned to the time-sliced worker: its pod stays Pending, every
//     binding refused with TIME_SLICING_FORBIDDEN;
//   - a Job with a privileged container, and one tolerating any pool
//     (operator Exists): the webhook refuses their pods (PRIVILEGED_CONTAINER,
//     FOREIGN_POOL), which Volcano's job controller reports on the Job.
//
// The tenant may not create Queues or Commands, which reach past its
// namespace.
func TestRealVolcano(t *testing.T) {
	manifest := os.Getenv("VOLCANO_MANIFEST")
	if manifest == "" {
		t.Fatal("VOLCANO_MANIFEST is not set: run make e2e-volcano")
	}
	var placed string // Volcano's manifest with its pods on the control plane
	f := features.New("real Volcano").
		Setup(setUpLab(func(l *lab.Lab) (map[string]any, error) {
			in, err := l.Profile("volcano")
			if err != nil {
				return nil, err
			}
			return lab.Merge(l.Values("lab"), map[string]any{"orchestratorIntegrations": []any{in}}), nil
		})).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			var err error
			if placed, err = volcanoOnControlPlane(ctx, manifest); err != nil {
				t.Fatal(err)
			}
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "apply", "--server-side", "-f", placed)
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
				"-n", "volcano-system", "rollout", "status", "deployment/volcano-scheduler", "deployment/volcano-controllers", "deployment/volcano-admission", "--timeout=5m")
			return ctx
		}).
		Assess("the tenant's compliant Job runs on the compliant worker; pinned to the time-sliced worker, its binding is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, compliant, sliced := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker], l.Tenant.Workers[lab.TimeSlicedWorker]
			_, dyn, err := l.As(l.User)
			if err != nil {
				t.Fatal(err)
			}
			pinned := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{
					"key": corev1.LabelHostname, "operator": "In", "values": []any{sliced}}}}}}}}
			for _, job := range []struct {
				name string
				spec map[string]any // pod spec fields besides the container and the pool toleration
			}{{"compliant", nil}, {"sliced", map[string]any{"affinity": pinned}}} {
				if err := createVolcanoJob(ctx, dyn, ns, job.name, poolToleration(l.Tenant.Name), job.spec, nil); err != nil {
					t.Fatalf("the tenant's user %s creating Volcano Job %s: %v", l.User, job.name, err)
				}
			}
			pod, err := waitVolcanoPodOn(ctx, l.Kube, ns, "compliant", compliant)
			if err != nil {
				t.Error(err)
			} else if pod.Spec.SchedulerName != "volcano" {
				t.Errorf("pod %s was placed by %q, want volcano", pod.Name, pod.Spec.SchedulerName)
			}
			if err := waitBindingRefused(ctx, l.Kube, ns, "sliced", "TIME_SLICING_FORBIDDEN"); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Assess("Jobs whose pods break the rules: privileged, tolerating any pool; refused by the webhook", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns := l.Tenant.Name
			_, dyn, err := l.As(l.User)
			if err != nil {
				t.Fatal(err)
			}
			anyPool := map[string]any{"key": lab.PoolLabel, "operator": "Exists", "effect": "NoSchedule"}
			for _, job := range []struct {
				name, reason string
				toleration   map[string]any
				container    map[string]any
			}{
				{"privileged", "PRIVILEGED_CONTAINER", poolToleration(l.Tenant.Name), map[string]any{"securityContext": map[string]any{"privileged": true}}},
				{"any-pool", "FOREIGN_POOL", anyPool, nil},
			} {
				if err := createVolcanoJob(ctx, dyn, ns, job.name, job.toleration, nil, job.container); err != nil {
					t.Fatalf("creating Volcano Job %s: %v", job.name, err)
				}
				if err := waitJobEvent(ctx, l.Kube, ns, job.name, job.reason); err != nil {
					t.Error(err)
				}
				pods, err := l.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "volcano.sh/job-name=" + job.name})
				if err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) != 0 {
					t.Errorf("Volcano Job %s has pod %s; want the webhook to refuse it (%s)", job.name, pods.Items[0].Name, job.reason)
				}
			}
			return ctx
		}).
		Assess("the tenant may not create Volcano Queues or Commands", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			_, dyn, err := l.As(l.User)
			if err != nil {
				t.Fatal(err)
			}
			dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			_, err = dyn.Resource(volcanoQueues).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": volcanoQueues.GroupVersion().String(), "kind": "Queue", "metadata": map[string]any{"name": l.Tenant.Name + "-own"},
				"spec": map[string]any{"weight": 1},
			}}, dryRun)
			if !lab.RBACDenial(err) {
				t.Errorf("the tenant creating a Queue: %v, want the authorizer's refusal", err)
			}
			_, err = dyn.Resource(volcanoCommands).Namespace(l.Tenant.Name).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": volcanoCommands.GroupVersion().String(), "kind": "Command", "metadata": map[string]any{"name": "close-default"},
				"action": "CloseQueue", "target": map[string]any{"apiVersion": volcanoQueues.GroupVersion().String(), "kind": "Queue", "name": "default", "uid": "0"},
			}}, dryRun)
			if !lab.RBACDenial(err) {
				t.Errorf("the tenant creating a Command on the default Queue: %v, want the authorizer's refusal", err)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ctx = tearDownLab(ctx, t, cfg)
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "delete", "--ignore-not-found", "-f", manifest)
			if placed != "" {
				_ = os.Remove(placed)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// poolToleration tolerates exactly the pool's taint, the one toleration of
// a pool a protected pod may have.
func poolToleration(pool string) map[string]any {
	return map[string]any{"key": lab.PoolLabel, "operator": "Equal", "value": pool, "effect": "NoSchedule"}
}

// createVolcanoJob creates a one-pod Volcano Job whose task tolerates
// toleration; spec and container add fields to its pod spec and container.
func createVolcanoJob(ctx context.Context, dyn dynamic.Interface, ns, name string, toleration, spec, container map[string]any) error {
	c := map[string]any{"name": "pause", "image": suite.Agnhost, "imagePullPolicy": "Never", "args": []any{"pause"}}
	for k, v := range container {
		c[k] = v
	}
	podSpec := map[string]any{"restartPolicy": "Never", "tolerations": []any{toleration}, "containers": []any{c}}
	for k, v := range spec {
		podSpec[k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": volcanoJobs.GroupVersion().String(), "kind": "Job", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"schedulerName": "volcano", "minAvailable": 1, "tasks": []any{map[string]any{
			"name": "worker", "replicas": 1, "template": map[string]any{"spec": podSpec},
		}}},
	}}
	_, err := dyn.Resource(volcanoJobs).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// volcanoPod returns the pod of a one-pod Volcano Job, nil until it exists.
func volcanoPod(ctx context.Context, kube kubernetes.Interface, ns, job string) (*corev1.Pod, error) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "volcano.sh/job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return nil, err
	}
	return &pods.Items[0], nil
}

// waitVolcanoPodOn waits until the pod of a Volcano Job runs on node. The
// volcano scheduler picks among equally scored nodes at random and tries
// again after a refused binding, so it may take a few sessions.
func waitVolcanoPodOn(ctx context.Context, kube kubernetes.Interface, ns, job, node string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := volcanoPod(ctx, kube, ns, job)
		if err != nil || p == nil {
			return false, nil
		}
		pod = p
		if p.Spec.NodeName != "" && p.Spec.NodeName != node {
			return false, fmt.Errorf("bound to %s", p.Spec.NodeName)
		}
		return p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the pod of Volcano Job %s: want it running on %s: %w (status: %s)", job, node, err, lab.DescribeStatus(pod))
	}
	return pod, nil
}

// waitBindingRefused waits until the volcano scheduler reports a refused
// binding of the pod of a Volcano Job with reason (its PodScheduled
// condition or a FailedScheduling event), and fails if the pod is bound.
func waitBindingRefused(ctx context.Context, kube kubernetes.Interface, ns, job, reason string) error {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := volcanoPod(ctx, kube, ns, job)
		if err != nil || p == nil {
			return false, nil
		}
		pod = p
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, reason) {
				return true, nil
			}
		}
		return hasEvent(ctx, kube, ns, p.Name, reason), nil
	})
	if err != nil {
		return fmt.Errorf("the pod of Volcano Job %s: want it Pending, its binding refused with %s: %w (status: %s)", job, reason, err, lab.DescribeStatus(pod))
	}
	return nil
}

// waitJobEvent waits until an event of a Volcano Job names reason: the
// job controller's FailedCreate carries the webhook's refusal of its pod.
func waitJobEvent(ctx context.Context, kube kubernetes.Interface, ns, job, reason string) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, kube, ns, job, reason), nil
	})
	if err != nil {
		events, _ := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", job).String()})
		var seen []string
		if events != nil {
			for _, e := range events.Items {
				seen = append(seen, e.Reason+": "+e.Message)
			}
		}
		return fmt.Errorf("no event of Volcano Job %s names %s: %w; its events: %v", job, reason, err, seen)
	}
	return nil
}

// hasEvent reports whether an event of the named object mentions text.
func hasEvent(ctx context.Context, kube kubernetes.Interface, ns, name, text string) bool {
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		return false
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// volcanoOnControlPlane reads Volcano's manifest (a URL or a file) and
// writes it to a temporary file with the pods of its Deployments and Jobs
// on the control plane: both workers are the tenant's pool, whose taint
// only the tenant's own pods may tolerate. Other documents are copied as
// they are.
func volcanoOnControlPlane(ctx context.Context, manifest string) (string, error) {
	var r io.Reader
	if strings.HasPrefix(manifest, "https://") || strings.HasPrefix(manifest, "http://") {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, manifest, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", fmt.Errorf("fetching Volcano's manifest: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("fetching Volcano's manifest %s: %s", manifest, resp.Status)
		}
		r = resp.Body
	} else {
		f, err := os.Open(manifest)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	var docs [][]byte
	placed := 0
	reader := yaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading Volcano's manifest: %w", err)
		}
		out, err := onControlPlane(doc)
		if err != nil {
			return "", fmt.Errorf("Volcano's manifest: %w", err)
		}
		if out != nil {
			placed++
			doc = out
		}
		docs = append(docs, doc)
	}
	if placed == 0 {
		return "", fmt.Errorf("Volcano's manifest %s has no Deployment or Job", manifest)
	}
	f, err := os.CreateTemp("", "volcano-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(bytes.Join(docs, []byte("\n---\n"))); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// onControlPlane returns a Deployment or Job document, as JSON, with its
// pods' node selector and tolerations set for the control plane; nil for
// any other document.
func onControlPlane(doc []byte) ([]byte, error) {
	j, err := yaml.ToJSON(doc)
	if err != nil {
		return nil, err
	}
	// A document that is not an object (empty, a comment) has no kind.
	var head struct{ Kind string }
	_ = json.Unmarshal(j, &head)
	if head.Kind != "Deployment" && head.Kind != "Job" {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"node-role.kubernetes.io/control-plane": ""},
		"spec", "template", "spec", "nodeSelector"); err != nil {
		return nil, fmt.Errorf("%s %s: %w", head.Kind, u.GetName(), err)
	}
	tolerations, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "tolerations")
	tolerations = append(tolerations, map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"})
	if err := unstructured.SetNestedSlice(u.Object, tolerations, "spec", "template", "spec", "tolerations"); err != nil {
		return nil, fmt.Errorf("%s %s: %w", head.Kind, u.GetName(), err)
	}
	return u.MarshalJSON()
}
