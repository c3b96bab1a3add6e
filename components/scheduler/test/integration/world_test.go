//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

var metaGet = metav1.GetOptions{}

// tenant is a tenant made for one test: its namespace, binding and policy.
type tenant struct {
	id, namespace, policy string
}

// newTenant creates a tenant whose policy accepts attested evidence and
// forbids time-slicing, with confinement Pool.
func newTenant(t *testing.T) tenant {
	t.Helper()
	id := "t-" + rand.String(6)
	tn := tenant{id: id, namespace: id + "-ml", policy: id + "-policy"}
	create(t, fixture.MakeNamespace(tn.namespace).Tenant(id).Obj())
	create(t, fixture.MakePlacementPolicy(tn.policy, v1alpha1.SourceAttested).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj())
	create(t, fixture.MakeTenantBinding(id, tn.namespace).Policy(tn.policy).Obj())
	return tn
}

// newNode creates a Node with room for pods; with a pool, it is labelled
// and tainted as a member of that pool.
func newNode(t *testing.T, pool string) *corev1.Node {
	t.Helper()
	b := fixture.MakeNode("n-" + rand.String(6))
	if pool != "" {
		b.Pool(pool)
	}
	n := b.Obj()
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	return createReadyNode(t, n)
}

// createReadyNode creates the node as a kubelet and the node controller
// would leave it: room for pods, Ready, and only its own taints — the API
// server taints new nodes not-ready, and no controller here lifts that.
func createReadyNode(t *testing.T, n *corev1.Node) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	created, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	created.Status.Capacity, created.Status.Allocatable = room, room
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if created, err = kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	created.Spec.Taints = n.Spec.Taints
	if created, err = kube.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created
}

// evidence is what a test says about a node.
type evidence struct {
	source      v1alpha1.EvidenceSource
	sharing     v1alpha1.GPUSharingMode
	incarnation string
	observedAt  time.Time
}

// attested is compliant evidence for the tenants of newTenant.
var attested = evidence{source: v1alpha1.SourceAttested, sharing: v1alpha1.SharingExclusive, incarnation: "boot-1"}

// setEvidence creates or replaces the node's NodeSecurityState.
func setEvidence(t *testing.T, n *corev1.Node, e evidence) {
	t.Helper()
	ctx := context.Background()
	b := fixture.MakeNodeSecurityState(n.Name, n.UID, e.source).Incarnation(e.incarnation).GPU("gpu-0", e.sharing)
	if !e.observedAt.IsZero() {
		b.ObservedAt(e.observedAt)
	}
	want := b.Obj()
	want.Labels = n.Labels
	var nss v1alpha1.NodeSecurityState
	err := k8s.Get(ctx, client.ObjectKey{Name: n.Name}, &nss)
	switch {
	case err == nil:
		nss.Spec = want.Spec
		err = k8s.Update(ctx, &nss)
	case client.IgnoreNotFound(err) == nil:
		nss = *want
		err = k8s.Create(ctx, &nss)
	}
	if err != nil {
		t.Fatalf("setting the evidence of %s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), &nss) })
}

// pod starts a pod of a fresh name in namespace for xila-guard-scheduler,
// asking for a little CPU.
func pod(namespace string) *fixture.PodWrapper {
	return fixture.MakePod("p-"+rand.String(6), namespace).Scheduler(guard.SchedulerName).Limit(corev1.ResourceCPU, "100m")
}

// newPod creates the pod and deletes it when the test ends.
func newPod(t *testing.T, b *fixture.PodWrapper) *corev1.Pod {
	t.Helper()
	p := b.Obj()
	created, err := kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = kube.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return created
}

// waitBound waits for the pod to be bound and returns its node.
func waitBound(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metaGet)
		return err == nil && got.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound: %s", p.Namespace, p.Name, scheduledCondition(got))
	}
	return got.Spec.NodeName
}

// waitRefused waits until the scheduler reports the pod unschedulable with
// every fragment in its message, and checks that it is not bound.
func waitRefused(t *testing.T, p *corev1.Pod, fragments ...string) string {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metaGet); err != nil {
			return false, nil
		}
		if got.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", got.Spec.NodeName)
		}
		msg := scheduledCondition(got)
		for _, f := range fragments {
			if !strings.Contains(msg, f) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: want it refused with %q: %v; PodScheduled: %s", p.Namespace, p.Name, fragments, err, scheduledCondition(got))
	}
	return scheduledCondition(got)
}

// stayPending checks that the pod is still not bound after d.
func stayPending(t *testing.T, p *corev1.Pod, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	got, err := kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" {
		t.Fatalf("pod %s/%s was bound to %s", p.Namespace, p.Name, got.Spec.NodeName)
	}
}

func scheduledCondition(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition"
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}
