//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
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

// waitRunning waits until a pod is Running and Ready and returns it
// (lab.WaitRunning), and fails the test when it does not.
func waitRunning(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := lab.WaitRunning(ctx, cs, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// installChart installs or upgrades the release through the lab, with the
// values of the files of e2e/testdata named by files and then values; it
// returns once the API server reaches the release's webhooks.
func installChart(ctx context.Context, t *testing.T, cfg *envconf.Config, files []string, values ...map[string]any) {
	t.Helper()
	var all []map[string]any
	for _, f := range files {
		v, err := lab.ValuesFile(filepath.Join(suite.RepoRoot, "e2e/testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, v)
	}
	if err := labCluster(t, cfg).InstallChart(ctx, lab.Merge(append(all, values...)...)); err != nil {
		t.Fatal(err)
	}
}

// uninstallChart removes the release through the lab and waits until its
// pods are gone.
func uninstallChart(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	t.Helper()
	if err := labCluster(t, cfg).UninstallChart(ctx); err != nil {
		t.Errorf("uninstalling the chart: %v", err)
	}
}

// setPool makes node a member of pool (lab.Cluster.SetPool), or of no pool
// when pool is empty, and returns the node.
func setPool(ctx context.Context, t *testing.T, cfg *envconf.Config, node, pool string) *corev1.Node {
	t.Helper()
	n, err := labCluster(t, cfg).SetPool(ctx, node, pool)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
