//go:build e2e

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/testcert"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// Volcano's kinds the test uses.
var (
	volcanoJobs     = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
	volcanoQueues   = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	volcanoCommands = schema.GroupVersionResource{Group: "bus.volcano.sh", Version: "v1alpha1", Resource: "commands"}
)

// realVolcanoSteps install real Volcano from its release manifest
// (VOLCANO_MANIFEST) next to the platform (TestPlatform), with the Volcano
// profile, its
// components on the control plane like the platform's (both workers are
// the tenant's pool). make e2e builds Volcano's binaries from its Go
// module into local images (VOLCANO_IMAGES, hack/build-dependency-images.sh)
// and makes the admission webhook's TLS here, in place of the manifest's
// init Job, whose image needs a shell and openssl; make e2e-volcano runs
// Volcano's published images instead. The tenant's user, with the tenant role and the profile's
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
func realVolcanoSteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	return f.
		Assess("real Volcano: installed from its release manifest, its pods on the control plane", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			placed, err := volcanoOnControlPlane(ctx, suite.VolcanoManifest, suite.VolcanoImages)
			if err != nil {
				t.Fatal(err)
			}
			ctx = context.WithValue(ctx, volcanoKey{}, placed)
			if len(suite.VolcanoImages) > 0 {
				makeVolcanoAdmissionTLS(ctx, t, clientset(t, cfg))
			}
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "apply", "--server-side", "-f", placed)
			runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
				"-n", "volcano-system", "rollout", "status", "deployment/volcano-scheduler", "deployment/volcano-controllers", "deployment/volcano-admission", "--timeout=5m")
			if err := waitVolcanoAdmission(ctx, dynamicClientFor(t, cfg), metav1.NamespaceDefault); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("real Volcano: the tenant's compliant Job runs on the compliant worker; pinned to the time-sliced worker, its binding is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
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
		Assess("real Volcano: Jobs whose pods break the rules: privileged, tolerating any pool; refused by the webhook", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
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
		Assess("real Volcano: the tenant may not create Volcano Queues or Commands", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
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
		Assess("real Volcano: the webhook down: the Job's pod is not created, let alone bound; back up, it runs on the compliant worker", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns, compliant := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
			_, dyn, err := l.As(l.User)
			if err != nil {
				t.Fatal(err)
			}
			// This step changes the release: it scales the webhook to zero
			// and back to what the release asked for.
			restore, err := l.WebhookDown(ctx, func(ctx context.Context) error {
				_, err := l.Kube.CoreV1().Pods(ns).Create(ctx, l.Pod("down-probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			})
			restored := false
			defer func() {
				if !restored && restore != nil {
					if err := restore(ctx); err != nil {
						t.Error(err)
					}
				}
			}()
			if err != nil {
				t.Fatal(err)
			}
			if err := createVolcanoJob(ctx, dyn, ns, "while-down", poolToleration(l.Tenant.Name), nil, nil); err != nil {
				t.Fatalf("creating Volcano Job while-down: %v", err)
			}
			if err := waitJobEvent(ctx, l.Kube, ns, "while-down", "failed calling webhook"); err != nil {
				t.Error(err)
			}
			if p, err := volcanoPod(ctx, l.Kube, ns, "while-down"); err != nil {
				t.Error(err)
			} else if p != nil {
				t.Errorf("with the webhook down, Volcano Job while-down has pod %s on node %q; want none", p.Name, p.Spec.NodeName)
			}
			restored = true
			if err := restore(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := waitVolcanoPodOn(ctx, l.Kube, ns, "while-down", compliant); err != nil {
				t.Error(err)
			}
			return ctx
		})
}

type volcanoKey struct{}

// tearDownRealVolcano removes what realVolcanoSteps installed.
func tearDownRealVolcano(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	placed, _ := ctx.Value(volcanoKey{}).(string)
	if placed == "" {
		return
	}
	runTool(ctx, t, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(), "delete", "--ignore-not-found", "--wait", "-f", placed)
	_ = os.Remove(placed)
}

// poolToleration tolerates exactly the pool's taint, the one toleration of
// a pool a protected pod may have.
func poolToleration(pool string) map[string]any {
	return map[string]any{"key": lab.PoolLabel, "operator": "Equal", "value": pool, "effect": "NoSchedule"}
}

// createVolcanoJob creates a one-pod Volcano Job whose task tolerates
// toleration; spec and container add fields to its pod spec and container.
func createVolcanoJob(ctx context.Context, dyn dynamic.Interface, ns, name string, toleration, spec, container map[string]any) error {
	_, err := dyn.Resource(volcanoJobs).Namespace(ns).Create(ctx, volcanoJob(name, toleration, spec, container), metav1.CreateOptions{})
	return err
}

// waitVolcanoAdmission waits until the API server reaches Volcano's
// admission webhook: a Deployment rolled out does not mean its Service
// routes to it yet, and Volcano's webhooks fail closed. The probe is a
// server-side dry run of a Job, which the webhooks see without anything
// being stored.
func waitVolcanoAdmission(ctx context.Context, dyn dynamic.Interface, ns string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = dyn.Resource(volcanoJobs).Namespace(ns).Create(ctx, volcanoJob("xg-admission-probe", nil, nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("volcano admission not answering: %v (last: %v)", err, last)
	}
	return nil
}

// volcanoJob is a one-pod Volcano Job whose task tolerates toleration (none
// when nil); spec and container add fields to its pod spec and container.
func volcanoJob(name string, toleration, spec, container map[string]any) *unstructured.Unstructured {
	c := map[string]any{"name": "pause", "image": suite.Agnhost, "imagePullPolicy": "Never", "args": []any{"pause"}}
	for k, v := range container {
		c[k] = v
	}
	podSpec := map[string]any{"restartPolicy": "Never", "containers": []any{c}}
	if toleration != nil {
		podSpec["tolerations"] = []any{toleration}
	}
	for k, v := range spec {
		podSpec[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": volcanoJobs.GroupVersion().String(), "kind": "Job", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"schedulerName": "volcano", "minAvailable": 1, "tasks": []any{map[string]any{
			"name": "worker", "replicas": 1, "template": map[string]any{"spec": podSpec},
		}}},
	}}
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
// only the tenant's own pods may tolerate. With images (binary name to
// image), each container runs the local image of its binary, and the
// manifest's Helm hooks (the admission init Job and its RBAC) are left
// out: makeVolcanoAdmissionTLS does their work. Other documents are copied
// as they are.
func volcanoOnControlPlane(ctx context.Context, manifest string, images map[string]string) (string, error) {
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
		if len(images) > 0 && isHelmHook(doc) {
			continue
		}
		out, err := onControlPlane(doc, images)
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

// isHelmHook reports whether a manifest document is a Helm hook.
func isHelmHook(doc []byte) bool {
	j, err := yaml.ToJSON(doc)
	if err != nil {
		return false
	}
	var head struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(j, &head)
	_, hook := head.Metadata.Annotations["helm.sh/hook"]
	return hook
}

// onControlPlane returns a Deployment or Job document, as JSON, with its
// pods' node selector and tolerations set for the control plane, and its
// containers' images replaced by images (keyed by the binary the image is
// named after, e.g. vc-scheduler); nil for any other document.
func onControlPlane(doc []byte, images map[string]string) ([]byte, error) {
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
	if len(images) > 0 {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			image, _ := c["image"].(string)
			binary, _, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
			local, ok := images[binary]
			if !ok {
				return nil, fmt.Errorf("%s %s: no local image for %s", head.Kind, u.GetName(), image)
			}
			c["image"], c["imagePullPolicy"] = local, "Never"
		}
		if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, fmt.Errorf("%s %s: %w", head.Kind, u.GetName(), err)
		}
	}
	return u.MarshalJSON()
}

// makeVolcanoAdmissionTLS makes what the manifest's admission init Job
// makes: the Secret volcano-admission-secret of volcano-system, a serving
// certificate for the admission Service and its CA, from which Volcano's
// webhook manager fills its webhook configurations' caBundle.
func makeVolcanoAdmissionTLS(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	const ns = "volcano-system"
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.WriteServingFor(t.TempDir(), 2, "volcano-admission-service."+ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{"ca.crt": ca.PEM}
	for name, f := range map[string]string{"tls.crt": certFile, "tls.key": keyFile} {
		if data[name], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, fixture.MakeNamespace(ns).Obj(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "volcano-admission-secret", Namespace: ns}, Data: data}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
