//go:build e2e

package kindlab

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLabCreateRepeatedly creates the lab cluster through Lab.Create, the
// provider's path, KIND_LAB_RUNS times in a row (default 3), and checks
// each time that every node is Ready and that configuring the network again
// converges. make test-kind-lab runs it; NODE_IMAGE names the node image.
func TestLabCreateRepeatedly(t *testing.T) {
	image := os.Getenv("NODE_IMAGE")
	if image == "" {
		t.Fatal("NODE_IMAGE must name the node image: run make test-kind-lab")
	}
	runs := 3
	if v := os.Getenv("KIND_LAB_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KIND_LAB_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	spec := Spec{Name: "xg-kindlab-go", NodeImage: image, Workers: DefaultWorkers, PodSubnet: DefaultPodSubnet, ServiceSubnet: DefaultServiceSubnet}
	lab := New()
	ctx := context.Background()
	if err := lab.CheckDocker(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.Delete(spec.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Delete(spec.Name); err != nil {
			t.Error(err)
		}
	})
	for run := 1; run <= runs; run++ {
		t.Run(fmt.Sprintf("run %d of %d", run, runs), func(t *testing.T) {
			start := time.Now()
			kubeconfig, err := lab.Create(ctx, spec, nil, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("cluster %s with %d Ready nodes in %s", spec.Name, spec.Nodes(), time.Since(start).Round(time.Second))
			checkAllReady(t, kubeconfig, spec.Nodes())
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := lab.ConfigureNetwork(ctx, spec, kubeconfig); err != nil {
				t.Fatalf("configuring the network again: %v", err)
			}
			if err := WaitReady(ctx, kubeconfig, spec.Nodes()); err != nil {
				t.Fatalf("after configuring the network again: %v", err)
			}
			if err := lab.Delete(spec.Name); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func checkAllReady(t *testing.T, kubeconfig string, want int) {
	t.Helper()
	cs, err := clientset(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != want {
		t.Errorf("%d nodes, want %d", len(nodes.Items), want)
	}
	for _, n := range nodes.Items {
		if !nodeReady(n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		if n.Spec.PodCIDR == "" {
			t.Errorf("node %s has no pod CIDR", n.Name)
		}
	}
}
