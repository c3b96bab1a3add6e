//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// removePoolTenant gives the workers of a tenant made by createTenant back
// (no pool, no evidence) and deletes its binding, policy and namespace.
func removePoolTenant(ctx context.Context, t *testing.T, cfg *envconf.Config, tenant string, workers []string) {
	t.Helper()
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	for _, w := range workers {
		setPool(ctx, t, cfg, w, "")
		_ = dyn.Resource(lab.States).Delete(ctx, w, metav1.DeleteOptions{})
	}
	_ = dyn.Resource(lab.Bindings).Delete(ctx, tenant, metav1.DeleteOptions{})
	_ = dyn.Resource(lab.Policies).Delete(ctx, tenant, metav1.DeleteOptions{})
	if err := cs.CoreV1().Namespaces().Delete(ctx, tenant, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", tenant, err)
	}
}

// createTenantPod creates an agnhost pod for the controlled scheduler.
func createTenantPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, affinity *corev1.Affinity) *corev1.Pod {
	t.Helper()
	p := fixture.MakePod(name, ns).Scheduler(lab.ControlledScheduler).Image(suite.Agnhost, corev1.PullNever).Args("pause").Obj()
	p.Spec.Affinity = affinity
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// pinnedToNode is lab.PinnedTo's required node affinity, for pods built
// here.
func pinnedToNode(node string) *corev1.Affinity {
	p := &corev1.Pod{}
	lab.PinnedTo(node)(p)
	return p.Spec.Affinity
}

// waitRefusedWith waits until the scheduler reports the pod unschedulable with
// reason in the message, and checks that it stays unbound.
func waitRefusedWith(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason string) {
	t.Helper()
	if err := lab.WaitPendingWith(ctx, cs, p.Namespace, p.Name, reason); err != nil {
		t.Fatal(err)
	}
}

func deletePodNow(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if err := lab.DeletePod(ctx, cs, p.Namespace, p.Name); err != nil {
		t.Errorf("deleting pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// createGuard creates a typed guard object (package fixture builds them),
// deleting first any cluster-scoped object of its kind and name.
func createGuard(ctx context.Context, t *testing.T, dyn dynamic.Interface, obj runtime.Object) {
	t.Helper()
	u, err := fixture.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(u.GroupVersionKind())
	r := dyn.Resource(gvr).Namespace(u.GetNamespace())
	if u.GetNamespace() == "" {
		_ = dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
	}
	if _, err := r.Create(ctx, u, metav1.CreateOptions{}); err != nil {
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

// createPoolTenant creates a tenant of one namespace, both named tenant,
// bound to a policy of its name that confines it to its pool, accepts
// evidence of source and forbids time-slicing.
func createPoolTenant(ctx context.Context, t *testing.T, cfg *envconf.Config, tenant string, source v1alpha1.EvidenceSource) {
	t.Helper()
	createTenant(ctx, t, cfg, fixture.MakePlacementPolicy(tenant, source).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj())
}

// createTenant creates a tenant of one namespace, both named after the
// policy, bound to the policy.
func createTenant(ctx context.Context, t *testing.T, cfg *envconf.Config, policy *v1alpha1.PlacementPolicy) {
	t.Helper()
	if err := labCluster(t, cfg).CreateTenantOf(ctx, policy); err != nil {
		t.Fatal(err)
	}
}
