package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/bench/internal/openloop"
)

// setting is one cell of the report: a mode, a rate and a variant.
type setting struct {
	mode    string
	rate    int
	variant string
}

// measurement is one measured run of a setting.
type measurement struct {
	sent, failed int
	firstErr     error
	// achieved is admitted CREATEs per second, from the first slot to the
	// last answer.
	achieved float64
	// p50 and p99 count from each request's slot; lateP99 is how late the
	// generator sent, included in them.
	p50, p99, lateP99 time.Duration
	// cpu is the CPU time per request of each process.
	cpu map[string]time.Duration
	// The API server's metrics over the measurement.
	request, validate, webhookCall histogram
	// The webhook's own: its handler's time and its collections.
	handler histogram
	gcs     float64
	// conns is how many connections the API server opened to the webhook,
	// generatorDials how many the generator opened to the API server.
	conns, generatorDials int
}

// Names of the metric families read.
const (
	metricRequest    = "apiserver_request_duration_seconds"
	metricStep       = "apiserver_admission_step_admission_duration_seconds"
	metricWebhook    = "apiserver_admission_webhook_admission_duration_seconds"
	metricHandler    = "xila_guard_webhook_request_duration_seconds"
	metricGC         = "go_gc_duration_seconds"
	processGenerator = "generator"
	processAPIServer = "kube-apiserver"
	processEtcd      = "etcd"
	processWebhook   = "webhook"
)

var processes = []string{processAPIServer, processEtcd, processWebhook, processGenerator}

// bench is everything a measurement uses.
type bench struct {
	o *options
	c *cluster
	// hooks are the webhook processes, and conns the connections to each,
	// by variant.
	hooks map[string]*webhookProcess
	conns map[string]*connWatcher
	g     *generator
}

// counters are what a measurement takes the difference of, read at
// once: CPU times, the generator's dials and the webhook's connections.
type counters struct {
	cpu   map[string]time.Duration
	conns int
	dials int64
}

// counters reads the counters; the connections are those to variant v's
// webhook, and the webhook's CPU is every webhook process's.
func (b *bench) counters(v string) counters {
	c := counters{cpu: map[string]time.Duration{
		processAPIServer: host.ProcCPU(b.c.apiserver), processEtcd: host.ProcCPU(b.c.etcd), processGenerator: host.SelfCPU(),
	}}
	for _, w := range b.hooks {
		c.cpu[processWebhook] += host.ProcCPU(w.pid())
	}
	c.dials = b.g.dials.Load()
	if w := b.conns[v]; w != nil {
		c.conns, _ = w.connections()
	}
	return c
}

// scrape is the API server's metrics and, when v is a webhook, its
// process's.
type scrape struct{ apiserver, webhook families }

// scrape reads the metrics. Serving /metrics costs the API server tens of
// milliseconds of CPU, so a measurement reads its counters after the first
// scrape and before the second.
func (b *bench) scrape(ctx context.Context, v string) (scrape, error) {
	var s scrape
	text, err := b.c.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("scraping the API server: %w", err)
	}
	if s.apiserver, err = parseMetrics(text, metricRequest, metricStep, metricWebhook); err != nil {
		return s, err
	}
	if w := b.hooks[v]; w != nil {
		if text, err = w.metricsText(ctx); err != nil {
			return s, fmt.Errorf("scraping the webhook: %w", err)
		}
		if s.webhook, err = parseMetrics(text, metricHandler, metricGC); err != nil {
			return s, err
		}
	}
	return s, nil
}

// measure applies the setting's variant, sends a warm-up at its rate, then
// measures for o.duration; real pods are deleted afterwards.
func (b *bench) measure(ctx context.Context, s setting, round int) (measurement, error) {
	var m measurement
	if err := useVariant(ctx, b.c, b.hooks, s.variant); err != nil {
		return m, err
	}
	dryRun := s.mode == modeDryRun
	load := func(d time.Duration) []openloop.Sample {
		n := int(d.Seconds() * float64(s.rate))
		return openloop.Run(ctx, s.rate, n, func(i int) error { return b.g.create(ctx, i, dryRun) })
	}
	if b.o.warmup > 0 {
		load(b.o.warmup)
	}
	before, err := b.scrape(ctx, s.variant)
	if err != nil {
		return m, err
	}
	var perf *perfRecording
	if w := b.hooks[s.variant]; b.o.perfDir != "" && w != nil {
		path := filepath.Join(b.o.perfDir, fmt.Sprintf("%s-%s-%d-%d.data", s.variant, s.mode, s.rate, round))
		if perf, err = recordPerf(w.pid(), path); err != nil {
			return m, err
		}
	}
	c0 := b.counters(s.variant)
	samples := load(b.o.duration)
	c1 := b.counters(s.variant)
	if perf != nil {
		perf.stop()
	}
	after, err := b.scrape(ctx, s.variant)
	if err != nil {
		return m, err
	}
	if ctx.Err() != nil {
		return m, ctx.Err()
	}
	m.sent, m.failed = len(samples), openloop.Errors(samples)
	interval := time.Second / time.Duration(s.rate)
	var last time.Duration
	for i, sm := range samples {
		last = max(last, time.Duration(i)*interval+sm.FromSlot)
		if sm.Err != nil && m.firstErr == nil {
			m.firstErr = sm.Err
		}
	}
	if last > 0 {
		m.achieved = float64(m.sent-m.failed) / last.Seconds()
	}
	fromSlot := func(s openloop.Sample) time.Duration { return s.FromSlot }
	m.p50, m.p99 = openloop.Percentile(samples, 50, fromSlot), openloop.Percentile(samples, 99, fromSlot)
	m.lateP99 = openloop.Percentile(samples, 99, func(s openloop.Sample) time.Duration { return s.Late })
	m.cpu = map[string]time.Duration{}
	for _, p := range processes {
		if m.sent > 0 {
			m.cpu[p] = (c1.cpu[p] - c0.cpu[p]) / time.Duration(m.sent)
		}
	}
	pods := labels{"verb": "POST", "resource": "pods", "subresource": ""}
	create := labels{"type": "validate", "operation": "CREATE"}
	m.request = after.apiserver.histogram(metricRequest, pods).since(before.apiserver.histogram(metricRequest, pods))
	m.validate = after.apiserver.histogram(metricStep, create).since(before.apiserver.histogram(metricStep, create))
	hook := labels{"name": hookNames[s.variant], "operation": "CREATE"}
	m.webhookCall = after.apiserver.histogram(metricWebhook, hook).since(before.apiserver.histogram(metricWebhook, hook))
	podsOnly := labels{"resource": "pods"}
	m.handler = after.webhook.histogram(metricHandler, podsOnly).since(before.webhook.histogram(metricHandler, podsOnly))
	m.gcs = after.webhook.histogram(metricGC, nil).count - before.webhook.histogram(metricGC, nil).count
	m.conns = c1.conns - c0.conns
	m.generatorDials = int(c1.dials - c0.dials)
	if !dryRun {
		if err := b.deletePods(ctx); err != nil {
			return m, err
		}
	}
	return m, nil
}

// deletePods deletes every pod of the tenants' namespaces and waits until
// they are gone. Pods no node was given go at once, with no kubelet.
func (b *bench) deletePods(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(b.g.namespaces))
	for i, ns := range b.g.namespaces {
		wg.Go(func() {
			pods := b.c.Kube.CoreV1().Pods(ns)
			if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{}); err != nil {
				errs[i] = fmt.Errorf("deleting the pods of %s: %w", ns, err)
				return
			}
			for {
				l, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
				if err != nil {
					errs[i] = err
					return
				}
				if len(l.Items) == 0 {
					return
				}
				select {
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// port is the port of a host:port address.
func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
