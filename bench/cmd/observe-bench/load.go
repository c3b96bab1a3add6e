package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
)

// populate creates the tenant, its policy, the pool nodes and the pods.
func populate(ctx context.Context, k8s client.Client, c config) error {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{guard.LabelTenant: "acme"}}},
		&v1alpha1.PlacementPolicy{ObjectMeta: objectMeta("bench"), Spec: v1alpha1.PlacementPolicySpec{
			Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}}}},
		&v1alpha1.TenantBinding{ObjectMeta: objectMeta("acme"), Spec: v1alpha1.TenantBindingSpec{
			TenantID: "acme", Namespaces: []string{"bench"}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: "bench"}}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range c.nodes {
		g.Go(func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{guard.LabelTenantPool: "acme",
				evidence.LabelGPUCount: "8", evidence.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", evidence.LabelSharingStrategy: "none"}}}
			if err := k8s.Create(gctx, n); err != nil {
				return err
			}
			for j := range c.podsPerNode {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("%s-%02d", n.Name, j)},
					Spec: corev1.PodSpec{NodeName: n.Name, SchedulerName: "runai-scheduler",
						Containers: []corev1.Container{{Name: "train", Image: "trainer"}}}}
				if err := k8s.Create(gctx, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// steadyState measures the process's CPU and memory over a quiet window.
func steadyState(window time.Duration) (string, error) {
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		return "", err
	}
	time.Sleep(window)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		return "", err
	}
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return fmt.Sprintf("steady state over %s: CPU %.1f%% of one core, heap in use %d MiB after GC, RSS %s",
		window, 100*cpu.Seconds()/window.Seconds(), ms.HeapInuse>>20, rss()), nil
}

func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			if kb, err := strconv.Atoi(f[1]); err == nil {
				return fmt.Sprintf("%d MiB", kb>>10)
			}
		}
	}
	return "unknown"
}

// flips changes the sharing strategy of one node at a time and waits for
// the drift records of all its pods.
func flips(ctx context.Context, k8s client.Client, sink *driftSink, c config) ([]time.Duration, error) {
	var lat []time.Duration
	for i := range c.flips {
		name := nodeName(i % c.nodes)
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return nil, err
		}
		base := n.DeepCopy()
		if n.Labels[evidence.LabelSharingStrategy] == "none" {
			n.Labels[evidence.LabelSharingStrategy] = "time-slicing"
		} else {
			n.Labels[evidence.LabelSharingStrategy] = "none"
		}
		t0 := time.Now()
		if err := k8s.Patch(ctx, n, client.MergeFrom(base)); err != nil {
			return nil, err
		}
		seen := 0
		timeout := time.After(30 * time.Second)
		for seen < c.podsPerNode {
			select {
			case a := <-sink.arrivals:
				if a.node == name {
					seen++
					if seen == c.podsPerNode {
						lat = append(lat, a.at.Sub(t0))
					}
				}
			case <-timeout:
				return nil, fmt.Errorf("node %s: %d of %d drift records after 30s", name, seen, c.podsPerNode)
			}
		}
	}
	slices.Sort(lat)
	return lat, nil
}
