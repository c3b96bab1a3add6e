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

	"github.com/xila-guard/xila-guard/bench/internal/openloop"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/scheduler/pkg/schedrun"
)

// runResult is what one run of one variant at one QPS setting measured.
type runResult struct {
	variant   string
	qps       int
	rate      float64          // burst: pods bound per second while all were waiting
	cpuPerPod time.Duration    // burst: CPU of scheduler, API server and etcd per pod
	p50, p99  time.Duration    // burst: scheduling latency
	steady    float64          // steady: pods bound per second
	sched     [2]time.Duration // steady: scheduling latency p50, p99
	e2e       [2]time.Duration // steady: from the scheduled creation to bound, p50, p99
	calls     float64          // evaluations
	misplaced int              // protected pods off their pool, or others on a pool
	means     map[string]time.Duration
}

// runVariant creates the burst's pods, starts the variant's scheduler and
// waits until every pod is bound; then pods arrive at a steady rate for a
// while; then it checks where all of them went and deletes them again.
func runVariant(ctx context.Context, o *options, c *cluster, example, variant string, qps, round int) (runResult, error) {
	res := runResult{variant: variant, qps: qps}
	if err := createBurst(ctx, o, c, variant); err != nil {
		return res, fmt.Errorf("creating pods: %w", err)
	}
	defer deletePods(context.WithoutCancel(ctx), o, c)
	file, err := writeConfig(c, example, variant, qps)
	if err != nil {
		return res, err
	}
	w, err := watchBinds(ctx, c)
	if err != nil {
		return res, err
	}
	sw := newStopwatch()
	callsBefore, timersBefore, cpuBefore := evaluatorCalls(), timers(), cpuTime()

	stopProfile, err := startProfile(o, fmt.Sprintf("%s-%d", variant, qps), round)
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
	last, err := w.wait(ctx, o.burstPods)
	if err != nil {
		return res, fmt.Errorf("%s: %w", variant, err)
	}
	stopProfile()
	res.rate = float64(o.burstPods) / last.Sub(start).Seconds()
	res.cpuPerPod = (cpuTime() - cpuBefore) / time.Duration(o.burstPods)
	res.p50, res.p99 = percentiles(sw.latencies(burstPrefix))

	steadyStart := time.Now()
	n, err := createSteady(ctx, o, c, variant)
	if err != nil {
		return res, fmt.Errorf("creating pods at a steady rate: %w", err)
	}
	if last, err = w.wait(ctx, o.burstPods+n); err != nil {
		return res, fmt.Errorf("%s: %w", variant, err)
	}
	res.steady = float64(n) / last.Sub(steadyStart).Seconds()
	res.sched[0], res.sched[1] = percentiles(sw.latencies(steadyPrefix))
	res.e2e[0], res.e2e[1] = percentiles(w.steadyLatencies())
	res.calls = evaluatorCalls() - callsBefore
	res.means = meansSince(timersBefore)
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

// Name prefixes of the burst's and the steady phase's pods.
const (
	burstPrefix  = "burst-"
	steadyPrefix = "steady-"
)

// createBurst creates the burst's pods, 16 at a time.
func createBurst(ctx context.Context, o *options, c *cluster, variant string) error {
	return parallel(ctx, o.burstPods, func(ctx context.Context, i int) error {
		return c.createPod(ctx, podFor(o, variant, burstPrefix, i, time.Now()))
	})
}

// createSteady creates pods open-loop at o.steadyRate for o.steadyFor:
// each pod is sent at its slot whatever happened to the ones before it,
// and carries that slot, so that latency counts from when the pod was due
// rather than from when a slow API server let it through. It returns how
// many it created.
func createSteady(ctx context.Context, o *options, c *cluster, variant string) (int, error) {
	n := int(float64(o.steadyRate) * o.steadyFor.Seconds())
	start := time.Now()
	interval := time.Second / time.Duration(o.steadyRate)
	samples := openloop.Run(ctx, o.steadyRate, n, func(i int) error {
		return c.createPod(ctx, podFor(o, variant, steadyPrefix, i, start.Add(time.Duration(i)*interval)))
	})
	if failed := openloop.Errors(samples); failed > 0 {
		return 0, fmt.Errorf("%d of %d creates failed", failed, len(samples))
	}
	return len(samples), ctx.Err()
}

func (c *cluster) createPod(ctx context.Context, p *corev1.Pod) error {
	_, err := c.Kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	return err
}

// podKind is one kind of pod in the mix.
type podKind int

const (
	tenantGPU  podKind = iota // in a tenant's namespace, one GPU
	tenantCPU                 // in a tenant's namespace, CPU only
	plain                     // no tenant, CPU only
	plainZonal                // no tenant, required to run in one zone
	plainGPU                  // no tenant, one GPU (on a general GPU node)
)

// mix is the pod mix, repeated every ten pods: 40% protected (half of
// them with a GPU), 60% plain (a third of those zonal, one in six with
// a GPU).
var mix = [10]podKind{tenantGPU, plain, tenantCPU, plainZonal, plain, tenantGPU, plainGPU, tenantCPU, plain, plainZonal}

// podFor builds the i-th pod of a phase. Under the affinity variant a
// tenant's pod carries what gives stock kube-scheduler the placement
// enforcement gives: a required node affinity for its pool and the
// toleration of the pool's taint.
func podFor(o *options, variant, prefix string, i int, sent time.Time) *corev1.Pod {
	kind := mix[i%len(mix)]
	ns, tenant := plainNamespace, ""
	if kind == tenantGPU || kind == tenantCPU {
		tenant = tenantID((i / len(mix)) % o.tenants)
		ns = tenant
	}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	var limits corev1.ResourceList
	if kind == tenantGPU || kind == plainGPU {
		one := resource.MustParse("1")
		requests[gpuResource] = one
		limits = corev1.ResourceList{gpuResource: one}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%05d", prefix, i), Namespace: ns,
			Annotations: map[string]string{sentAnnotation: sent.Format(time.RFC3339Nano)}},
		Spec: corev1.PodSpec{SchedulerName: guard.SchedulerName, Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/bench",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
		}}},
	}
	var terms []corev1.NodeSelectorRequirement
	if kind == plainZonal {
		terms = append(terms, corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone,
			Operator: corev1.NodeSelectorOpIn, Values: []string{zoneName(i / len(mix))}})
	}
	if tenant != "" && variant == "affinity" {
		terms = append(terms, corev1.NodeSelectorRequirement{Key: guard.LabelTenantPool,
			Operator: corev1.NodeSelectorOpIn, Values: []string{tenant}})
		p.Spec.Tolerations = []corev1.Toleration{{Key: guard.TaintTenantPool, Operator: corev1.TolerationOpEqual,
			Value: tenant, Effect: corev1.TaintEffectNoSchedule}}
	}
	if len(terms) > 0 {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: terms}}}}}
	}
	return p
}

// sentAnnotation carries when the benchmark sent a pod, for the latency
// from creation to bind.
const sentAnnotation = "bench.xila.us/sent"

// bindWatcher notes when each pod is seen bound.
type bindWatcher struct {
	mu      sync.Mutex
	changed chan struct{}
	boundAt map[string]time.Time
	latency []time.Duration // of the steady phase's pods, from when each was due
}

// watchBinds starts watching pods until ctx ends.
func watchBinds(ctx context.Context, c *cluster) (*bindWatcher, error) {
	w := &bindWatcher{changed: make(chan struct{}, 1), boundAt: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(c.Kube, 0)
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
		if sent, err := time.Parse(time.RFC3339Nano, p.Annotations[sentAnnotation]); err == nil && strings.HasPrefix(p.Name, steadyPrefix) {
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

func (w *bindWatcher) steadyLatencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.latency)
}

// misplaced counts pods the variant put where enforcement would not: a
// protected pod off its tenant's pool, a plain pod on a pool node.
func misplaced(ctx context.Context, c *cluster) (int, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pool := map[string]string{}
	for _, n := range nodes.Items {
		pool[n.Name] = n.Labels[guard.LabelTenantPool]
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
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
		_ = c.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
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
		if f.GetName() != "xila_guard_scheduler_evaluations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
