//go:build e2e

package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

type namespaceKey struct{}

// createNamespace makes a fresh namespace for a feature and keeps its name
// in the context.
func createNamespace(prefix string) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		name := envconf.RandomName("xg-"+prefix, 16)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := clientset(t, cfg).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		return context.WithValue(ctx, namespaceKey{}, name)
	}
}

// deleteNamespace removes the feature's namespace.
func deleteNamespace() features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		if err := clientset(t, cfg).CoreV1().Namespaces().Delete(ctx, namespaceFrom(ctx), metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", namespaceFrom(ctx), err)
		}
		return ctx
	}
}

func namespaceFrom(ctx context.Context) string {
	ns, _ := ctx.Value(namespaceKey{}).(string)
	return ns
}

func clientset(t *testing.T, cfg *envconf.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(cfg))
	if err != nil {
		t.Fatalf("building clientset: %v", err)
	}
	return cs
}

// restConfig is the cluster's client configuration without client-go's
// default rate limit (5 requests/s, bursts of 10): a scenario that
// relabels a dozen objects and reads them back would otherwise spend
// seconds waiting on its own client, not on the cluster.
func restConfig(cfg *envconf.Config) *rest.Config {
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	return rc
}

// workerNames lists the nodes that are not control planes, sorted.
func workerNames(ctx context.Context, t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!node-role.kubernetes.io/control-plane"})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names
}

// twoWorkers returns the first two workers, failing the test on a cluster
// with fewer.
func twoWorkers(ctx context.Context, t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	workers := workerNames(ctx, t, cs)
	if len(workers) < 2 {
		t.Fatalf("need 2 workers, cluster has %v", workers)
	}
	return workers[:2]
}

// waitRunning waits until a pod is Running and Ready and returns it.
func waitRunning(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		if p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Running and Ready: %v (status: %s)", ns, name, err, describeStatus(pod))
	}
	return pod
}

func describeStatus(p *corev1.Pod) string {
	if p == nil {
		return "not found"
	}
	parts := []string{string(p.Status.Phase)}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, string(c.Type)+": "+c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, cs.Name+": "+w.Reason+" "+w.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// tenantPool is what a feature's Setup made: a tenant and the workers it
// made the tenant's pool.
type tenantPool struct {
	tenant  string
	workers []string
}

// poolFrom returns the tenantPool a feature's Setup stored under key.
func poolFrom(ctx context.Context, t *testing.T, key any) *tenantPool {
	t.Helper()
	p, ok := ctx.Value(key).(*tenantPool)
	if !ok {
		t.Fatalf("no %T set-up in the context: the feature's Setup failed", key)
	}
	return p
}
