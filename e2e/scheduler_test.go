//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

// Names the enforcement test shares with the product.
const (
	guardGroup          = "guard.xila.us"
	guardPoolLabel      = "guard.xila.us/tenant-pool"
	guardTenantLabel    = "guard.xila.us/tenant"
	controlledScheduler = "xila-guard-scheduler"
	platformNS          = "xila-guard-system"
	releaseName         = "xila-guard"
	compliantWorker     = 0 // index in workerNames: mock evidence, exclusive GPUs
	timeSlicedWorker    = 1 // mock evidence, time-sliced GPUs
)

var (
	guardPolicies = schema.GroupVersionResource{Group: guardGroup, Version: "v1alpha1", Resource: "placementpolicies"}
	guardBindings = schema.GroupVersionResource{Group: guardGroup, Version: "v1alpha1", Resource: "tenantbindings"}
	guardStates   = schema.GroupVersionResource{Group: guardGroup, Version: "v1alpha1", Resource: "nodesecuritystates"}
)

// enforcement is what the test set up, kept in the context.
type enforcement struct {
	tenant  string
	workers []string
}

type enforcementKey struct{}

// TestEnforcement installs xila-guard-scheduler (the evaluator linked in)
// with the chart, makes both workers a tenant's pool with mock evidence — the first
// compliant, the second time-sliced — and checks the three outcomes of the
// demo: production refuses mock evidence, lab schedules to the compliant
// worker only, and a pod pinned to the time-sliced worker stays Pending.
func TestEnforcement(t *testing.T) {
	f := features.New("controlled scheduler with the real evaluator").
		Setup(installEnforcement).
		Assess("production profile: Pending with SOURCE_NOT_ACCEPTED", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			e := ctx.Value(enforcementKey{}).(*enforcement)
			cs := clientset(t, cfg)
			p := createTenantPod(ctx, t, cs, e.tenant, "production", nil)
			waitRefusedWith(ctx, t, cs, p, "SOURCE_NOT_ACCEPTED")
			deletePodNow(ctx, t, cs, p)
			return ctx
		}).
		Assess("lab profile: scheduled to the compliant worker only", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			e := ctx.Value(enforcementKey{}).(*enforcement)
			cs := clientset(t, cfg)
			helmInstall(ctx, t, cfg, "lab")
			for i := range 3 {
				p := createTenantPod(ctx, t, cs, e.tenant, fmt.Sprintf("lab-%d", i), nil)
				if got := waitRunning(ctx, t, cs, e.tenant, p.Name).Spec.NodeName; got != e.workers[compliantWorker] {
					t.Errorf("pod %s runs on %s, want the compliant worker %s", p.Name, got, e.workers[compliantWorker])
				}
			}
			return ctx
		}).
		Assess("pinned to the time-sliced worker: Pending with TIME_SLICING_FORBIDDEN", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			e := ctx.Value(enforcementKey{}).(*enforcement)
			cs := clientset(t, cfg)
			p := createTenantPod(ctx, t, cs, e.tenant, "pinned", pinnedToNode(e.workers[timeSlicedWorker]))
			waitRefusedWith(ctx, t, cs, p, "TIME_SLICING_FORBIDDEN")
			time.Sleep(5 * time.Second)
			if got, err := cs.CoreV1().Pods(e.tenant).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || got.Spec.NodeName != "" {
				t.Errorf("pinned pod: bound to %q (err %v), want it Pending", got.Spec.NodeName, err)
			}
			// Why is it Pending? kubectl xila-guard explain, as make demo
			// phase 3 shows it.
			c, err := lab.NewCluster(cfg.KubeconfigFile(), suite.BinDir, suite.RepoRoot, suite.ImageTag, suite.Agnhost)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ExplainPending(ctx, "lab", e.tenant, p.Name, e.workers[timeSlicedWorker], "TIME_SLICING_FORBIDDEN", e.workers[compliantWorker]); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Teardown(uninstallEnforcement).
		Feature()
	testenv.Test(t, f)
}

// installEnforcement installs the CRDs and the chart (production profile)
// and turns the workers into the pool of a new tenant.
func installEnforcement(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	applyCRDs(ctx, t, cfg)
	helmInstall(ctx, t, cfg, "production")

	e := &enforcement{tenant: envconf.RandomName("xg-tenant", 16), workers: twoWorkers(ctx, t, cs)}
	createPoolTenant(ctx, t, cs, dyn, e.tenant, "attested")
	for i, w := range e.workers[:2] {
		sharing := "Exclusive"
		if i == timeSlicedWorker {
			sharing = "TimeSlicing"
		}
		node := setPool(ctx, t, cs, w, e.tenant)
		createGuardObject(ctx, t, dyn, guardStates, map[string]any{
			"apiVersion": guardGroup + "/v1alpha1", "kind": "NodeSecurityState",
			"metadata": map[string]any{"name": w, "labels": map[string]any{guardPoolLabel: e.tenant}},
			"spec": map[string]any{
				"nodeUID": string(node.UID), "incarnation": "e2e-1", "observedAt": time.Now().UTC().Format(time.RFC3339),
				"source": "mock", "complete": true,
				"devices": []any{map[string]any{"id": "gpu-0", "vendor": "nvidia", "sharingMode": sharing}},
			},
		})
	}
	return context.WithValue(ctx, enforcementKey{}, e)
}

// uninstallEnforcement gives the workers back and removes what the test
// made, the chart included.
func uninstallEnforcement(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	e, _ := ctx.Value(enforcementKey{}).(*enforcement)
	if e == nil {
		return ctx
	}
	removePoolTenant(ctx, t, cfg, e.tenant, e.workers[:2])
	runTool(ctx, t, filepath.Join(suite.BinDir, "helm"), "--kubeconfig", cfg.KubeconfigFile(),
		"uninstall", releaseName, "-n", platformNS, "--wait")
	return ctx
}

// removePoolTenant gives the workers of a tenant made by createTenant back
// (no pool, no evidence) and deletes its binding, policy and namespace.
func removePoolTenant(ctx context.Context, t *testing.T, cfg *envconf.Config, tenant string, workers []string) {
	t.Helper()
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	for _, w := range workers {
		setPool(ctx, t, cs, w, "")
		_ = dyn.Resource(guardStates).Delete(ctx, w, metav1.DeleteOptions{})
	}
	_ = dyn.Resource(guardBindings).Delete(ctx, tenant, metav1.DeleteOptions{})
	_ = dyn.Resource(guardPolicies).Delete(ctx, tenant, metav1.DeleteOptions{})
	if err := cs.CoreV1().Namespaces().Delete(ctx, tenant, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", tenant, err)
	}
}

// helmInstall installs or upgrades the chart with enforcement on, in the
// given profile, and waits for it to roll out.
func helmInstall(ctx context.Context, t *testing.T, cfg *envconf.Config, profile string) {
	t.Helper()
	runTool(ctx, t, filepath.Join(suite.BinDir, "helm"), "--kubeconfig", cfg.KubeconfigFile(),
		"upgrade", "--install", releaseName, filepath.Join(suite.RepoRoot, "charts/xila-guard"),
		"-n", platformNS, "--create-namespace", "--wait", "--timeout", "3m",
		"-f", filepath.Join(suite.RepoRoot, "e2e/testdata/enforcement-values.yaml"),
		"--set", "image.tag="+suite.ImageTag, "--set", "enforcement.profile="+profile)
}

// setPool labels and taints a worker as a member of pool, or removes both
// when pool is empty.
func setPool(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, pool string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		taints := n.Spec.Taints[:0]
		for _, taint := range n.Spec.Taints {
			if taint.Key != guardPoolLabel {
				taints = append(taints, taint)
			}
		}
		delete(n.Labels, guardPoolLabel)
		if pool != "" {
			n.Labels[guardPoolLabel] = pool
			taints = append(taints, corev1.Taint{Key: guardPoolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = taints
		node, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("setting the pool of node %s to %q: %v", name, pool, err)
	}
	return node
}

// createTenantPod creates an agnhost pod for the controlled scheduler.
func createTenantPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, affinity *corev1.Affinity) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: controlledScheduler,
			Affinity:      affinity,
			Containers: []corev1.Container{{
				Name: "pause", Image: suite.Agnhost, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

func pinnedToNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// waitRefusedWith waits until the scheduler reports the pod unschedulable with
// reason in the message, and checks that it stays unbound.
func waitRefusedWith(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason string) {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		if got.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", got.Spec.NodeName)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, reason) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: want it Pending with %s: %v (status: %s)", p.Namespace, p.Name, reason, err, describeStatus(got))
	}
}

func deletePodNow(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	zero := int64(0)
	if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Errorf("deleting pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func createGuardObject(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	_ = dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
	if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

func dynamicClientFor(t *testing.T, cfg *envconf.Config) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(restConfig(cfg))
	if err != nil {
		t.Fatalf("building a dynamic client: %v", err)
	}
	return dyn
}

// runTool runs a command and fails the test with its output when it fails.
func runTool(ctx context.Context, t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// applyCRDs installs the guard CRDs and waits until they are served.
func applyCRDs(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	t.Helper()
	kubectl := filepath.Join(suite.BinDir, "kubectl")
	runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(),
		"apply", "--server-side", "-f", filepath.Join(suite.RepoRoot, "components/api/config/crd"))
	runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(),
		"wait", "--for=condition=Established", "--timeout=60s", "crd/placementpolicies.guard.xila.us",
		"crd/tenantbindings.guard.xila.us", "crd/nodesecuritystates.guard.xila.us", "crd/keyreleasepolicies.guard.xila.us")
}

// createPoolTenant creates a tenant of one namespace, both named tenant,
// bound to a policy of its name that confines it to its pool, accepts
// evidence of source and forbids time-slicing.
func createPoolTenant(ctx context.Context, t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, tenant, source string) {
	t.Helper()
	createTenant(ctx, t, cs, dyn, tenant, map[string]any{
		"confinement": "Pool",
		"evidence":    map[string]any{"acceptedSources": []any{source}},
		"gpuSharing":  map[string]any{"forbiddenModes": []any{"TimeSlicing"}},
	})
}

// createTenant creates a tenant of one namespace, both named tenant, bound
// to a policy of its name with the given spec.
func createTenant(ctx context.Context, t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, tenant string, policy map[string]any) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: map[string]string{guardTenantLabel: tenant}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the tenant's namespace: %v", err)
	}
	createGuardObject(ctx, t, dyn, guardPolicies, map[string]any{
		"apiVersion": guardGroup + "/v1alpha1", "kind": "PlacementPolicy", "metadata": map[string]any{"name": tenant},
		"spec": policy,
	})
	createGuardObject(ctx, t, dyn, guardBindings, map[string]any{
		"apiVersion": guardGroup + "/v1alpha1", "kind": "TenantBinding", "metadata": map[string]any{"name": tenant},
		"spec": map[string]any{"tenantId": tenant, "namespaces": []any{tenant}, "effectivePolicyRef": map[string]any{"name": tenant}},
	})
}
