package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/scheduler/pkg/schedrun"
)

// runResult is what one run of one variant measured.
type runResult struct {
	variant   string
	elapsed   time.Duration
	rate      float64 // pods bound per second while all were waiting
	p50, p99  time.Duration
	paced     [2]time.Duration // p50, p99 from creation to bind at a steady rate
	cpuPerPod time.Duration    // CPU of scheduler, API server and etcd per pod
	calls     float64          // evaluations
	misplaced int              // protected pods off their pool, or others on a pool
	means     map[string]time.Duration
}

// runVariant creates the pods, starts the variant's scheduler and waits
// until every pod is bound; then it creates more pods at a steady rate,
// checks where all of them went and deletes them again.
func runVariant(ctx context.Context, o *options, c *cluster, example, variant string, round int) (runResult, error) {
	res := runResult{variant: variant}
	if err := createPods(ctx, o, c, "pod", o.pods, 0); err != nil {
		return res, fmt.Errorf("creating pods: %w", err)
	}
	defer deletePods(context.WithoutCancel(ctx), o, c)
	file, err := writeConfig(o, c, example, variant)
	if err != nil {
		return res, err
	}
	w, err := watchBinds(ctx, c)
	if err != nil {
		return res, err
	}
	sw := newStopwatch()
	callsBefore, timersBefore, cpuBefore := evaluatorCalls(), timers(), cpuTime()

	stopProfile, err := startProfile(o, variant, round)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	schedCtx, stop := context.WithCancel(ctx)
	defer stop()
	if _, err := schedrun.Start(schedCtx, file, app.WithPlugin(stopwatchName, sw.factory)); err != nil {
		return res, err
	}
	start := time.Now()
	last, err := w.wait(ctx, o.pods)
	if err != nil {
		return res, fmt.Errorf("%s: %w", variant, err)
	}
	stopProfile()
	res.elapsed = last.Sub(start)
	res.rate = float64(o.pods) / res.elapsed.Seconds()
	res.cpuPerPod = (cpuTime() - cpuBefore) / time.Duration(o.pods)
	res.calls = evaluatorCalls() - callsBefore
	res.means = meansSince(timersBefore)
	res.p50, res.p99 = percentiles(sw.latencies())

	if o.pacedPods > 0 {
		if err := createPods(ctx, o, c, "paced", o.pacedPods, o.pacedRate); err != nil {
			return res, fmt.Errorf("creating paced pods: %w", err)
		}
		if _, err := w.wait(ctx, o.pods+o.pacedPods); err != nil {
			return res, fmt.Errorf("%s: %w", variant, err)
		}
		res.paced[0], res.paced[1] = percentiles(w.pacedLatencies())
	}
	stop()
	res.misplaced, err = misplaced(ctx, c)
	return res, err
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// createPods creates n pods named prefix-<i>, protected and plain ones
// interleaved: all at once, or rate per second when rate > 0, noting
// when each was sent.
func createPods(ctx context.Context, o *options, c *cluster, prefix string, n int, rate float64) error {
	protectedEvery := 0
	if o.protected > 0 {
		protectedEvery = int(1 / o.protected)
	}
	create := func(ctx context.Context, i int) error {
		ns := plainNamespace
		if protectedEvery > 0 && i%protectedEvery == 0 {
			ns = tenantID((i / protectedEvery) % o.tenants)
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i), Namespace: ns,
				Annotations: map[string]string{sentAnnotation: time.Now().Format(time.RFC3339Nano)}},
			Spec: corev1.PodSpec{SchedulerName: guard.SchedulerName, Containers: []corev1.Container{{
				Name: "c", Image: "registry.invalid/bench",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			}}},
		}
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	if rate <= 0 {
		return parallel(ctx, n, create)
	}
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		if err := create(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// sentAnnotation carries when the benchmark sent a pod, for the latency
// from creation to bind.
const sentAnnotation = "bench.xila.us/sent"

// bindWatcher notes when each pod is seen bound.
type bindWatcher struct {
	mu      sync.Mutex
	changed chan struct{}
	boundAt map[string]time.Time
	latency []time.Duration // of the paced pods
}

// watchBinds starts watching pods until ctx ends.
func watchBinds(ctx context.Context, c *cluster) (*bindWatcher, error) {
	w := &bindWatcher{changed: make(chan struct{}, 1), boundAt: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(c.kube, 0)
	inf := factory.Core().V1().Pods().Informer()
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		key := p.Namespace + "/" + p.Name
		if _, seen := w.boundAt[key]; seen {
			return
		}
		w.boundAt[key] = now
		if sent, err := time.Parse(time.RFC3339Nano, p.Annotations[sentAnnotation]); err == nil && strings.HasPrefix(p.Name, "paced-") {
			w.latency = append(w.latency, now.Sub(sent))
		}
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w, nil
}

// wait returns when n pods have been bound, and the time of the last bind.
func (w *bindWatcher) wait(ctx context.Context, n int) (time.Time, error) {
	deadline := time.After(30 * time.Minute)
	for {
		w.mu.Lock()
		var last time.Time
		for _, t := range w.boundAt {
			if t.After(last) {
				last = t
			}
		}
		done := len(w.boundAt) >= n
		w.mu.Unlock()
		if done {
			return last, nil
		}
		select {
		case <-w.changed:
		case <-deadline:
			return time.Time{}, fmt.Errorf("only %d of %d pods bound within 30 minutes", len(w.boundAt), n)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

func (w *bindWatcher) pacedLatencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.latency)
}

// misplaced counts pods the variant put where enforcement would not: a
// protected pod off its tenant's pool, a plain pod on a pool node.
func misplaced(ctx context.Context, c *cluster) (int, error) {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pool := map[string]string{}
	for _, n := range nodes.Items {
		pool[n.Name] = n.Labels[guard.LabelTenantPool]
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	bad := 0
	for _, p := range pods.Items {
		want := ""
		if p.Namespace != plainNamespace {
			want = p.Namespace
		}
		if pool[p.Spec.NodeName] != want {
			bad++
		}
	}
	return bad, nil
}

// deletePods removes every pod and waits until they are gone.
func deletePods(ctx context.Context, o *options, c *cluster) {
	zero := int64(0)
	namespaces := []string{plainNamespace}
	for i := range o.tenants {
		namespaces = append(namespaces, tenantID(i))
	}
	for _, ns := range namespaces {
		_ = c.kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// evaluatorCalls sums the plugin's evaluation counter.
func evaluatorCalls() float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != "xilaguard_scheduler_evaluations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
