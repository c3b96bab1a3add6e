package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/xila-guard/xila-guard/bench/internal/host"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.crds); err != nil {
		return fmt.Errorf("run admission-bench from the repository's root, or set --crds: %w", err)
	}
	if o.perfDir != "" {
		if err := os.MkdirAll(o.perfDir, 0o755); err != nil {
			return err
		}
	}
	c, err := startCluster(o)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := c.populate(ctx, o.tenants); err != nil {
		return fmt.Errorf("creating the tenants: %w", err)
	}
	bin := o.webhookBin
	if bin == "" {
		if bin, err = buildWebhook(ctx, c.Dir); err != nil {
			return err
		}
	}
	b := &bench{o: o, c: c, hooks: map[string]*webhookProcess{}, conns: map[string]*connWatcher{}}
	defer func() {
		for _, w := range b.hooks {
			w.stop()
		}
	}()
	for _, v := range o.variants {
		if key := servingKeys[v]; key != "" {
			w, err := startWebhook(ctx, o, bin, key, c)
			if err != nil {
				return err
			}
			b.hooks[v], b.conns[v] = w, watchConns(ctx, port(w.addr))
		}
	}
	if b.g, err = newGenerator(c, o.tenants, o.conns); err != nil {
		return err
	}
	if err := b.g.connect(ctx); err != nil {
		return err
	}
	idle, err := c.settle(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kube-apiserver settled: %.1f%% of a CPU at rest\n", idle*100)
	env := fmt.Sprintf("%d CPUs, GOMAXPROCS=%d, %d tenants, %s per measurement after %s warm-up, %d rounds, webhook Go settings %s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), o.tenants, o.duration, o.warmup, o.rounds, goSettings(o))
	fmt.Fprintf(stderr, "%s\nstarted %s, load average %s\n", env, time.Now().UTC().Format(time.RFC3339), host.LoadAvg())
	loadBefore := host.LoadAvg()
	results := map[setting][]measurement{}
	for round := 1; round <= o.rounds; round++ {
		for _, mode := range o.modes {
			for _, rate := range o.rates {
				for _, v := range rotate(o.variants, round-1) {
					s := setting{mode, rate, v}
					m, err := b.measure(ctx, s, round)
					if err != nil {
						return fmt.Errorf("round %d, %s %d/s %s: %w", round, mode, rate, v, err)
					}
					logMeasurement(stderr, round, s, m)
					results[s] = append(results[s], m)
				}
			}
		}
	}
	if err := useVariant(ctx, c, b.hooks, variantNone); err != nil {
		return err
	}
	report(stdout, o, results, env, loadBefore, host.LoadAvg())
	return nil
}

// rotate starts vs at its k-th element, so that each variant takes each
// place in the order of a round as often as the rounds allow.
func rotate(vs []string, k int) []string {
	k %= len(vs)
	return append(append([]string{}, vs[k:]...), vs[:k]...)
}

func goSettings(o *options) string {
	s := fmt.Sprint(chartGo)
	if o.goDefaults {
		s = "Go's defaults"
	}
	if o.webhookProcs > 0 {
		s += fmt.Sprintf(", GOMAXPROCS=%d", o.webhookProcs)
	}
	return s
}

func logMeasurement(w io.Writer, round int, s setting, m measurement) {
	fmt.Fprintf(w, "round %d %-7s %5d/s %-7s p50 %s p99 %s achieved %.0f/s failed %d/%d late p99 %s; cpu/req apiserver %s etcd %s webhook %s generator %s; webhook conns %d, gcs %.0f, generator dials %d\n",
		round, s.mode, s.rate, s.variant, ms(m.p50), ms(m.p99), m.achieved, m.failed, m.sent, ms(m.lateP99),
		us(m.cpu[processAPIServer]), us(m.cpu[processEtcd]), us(m.cpu[processWebhook]), us(m.cpu[processGenerator]),
		m.conns, m.gcs, m.generatorDials)
	if m.firstErr != nil {
		fmt.Fprintf(w, "  first error: %v\n", m.firstErr)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
