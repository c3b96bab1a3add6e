package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	example := "components/scheduler/config/config.yaml"
	if _, err := os.Stat(example); err != nil {
		return fmt.Errorf("run sched-bench from the repository's root: %w", err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(o.featureGates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	schedmetrics.Register()
	c, err := startCluster(o)
	if err != nil {
		return err
	}
	defer c.stop()
	fmt.Fprintf(os.Stderr, "creating %d nodes (%d in %d pools) and their evidence\n", o.nodes, o.poolNodes, o.tenants)
	if err := c.populate(ctx, o); err != nil {
		return fmt.Errorf("creating the cluster's objects: %w", err)
	}
	var results []runResult
	for round := 1; round <= o.runs; round++ {
		for _, q := range o.qps {
			for _, v := range o.variants {
				r, err := runVariant(ctx, o, c, example, v, q, round)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "round %d %-11s %-22s burst %6.1f pods/s, CPU %s/pod; steady %5.1f pods/s, scheduling p50 %s p99 %s, created→bound p50 %s p99 %s; %.0f evaluations, %d misplaced\n",
					round, v, qpsName(q), r.rate, ms(r.cpuPerPod), r.steady, ms(r.sched[0]), ms(r.sched[1]), ms(r.e2e[0]), ms(r.e2e[1]), r.calls, r.misplaced)
				results = append(results, r)
			}
		}
	}
	report(os.Stdout, o, results)
	return nil
}

// report prints, for each QPS setting and variant, the medians over the
// rounds, and how (a) compares with (d): the median over rounds of the
// ratio and of the difference within one round, since the runs of a round
// share the machine's load.
func report(w io.Writer, o *options, results []runResult) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "%d nodes (%d in %d pools, %d general with GPUs), %d pods at once, then %d/s for %s; feature gates %q; %d rounds, medians shown; %d CPUs, load %s\n",
		o.nodes, o.poolNodes, o.tenants, o.generalGPUNodes, o.burstPods, o.steadyRate, o.steadyFor, o.featureGates, o.runs, runtime.NumCPU(),
		strings.Fields(string(load) + " ?")[0])
	for _, q := range o.qps {
		of := func(v string) []runResult {
			var rs []runResult
			for _, r := range results {
				if r.variant == v && r.qps == q {
					rs = append(rs, r)
				}
			}
			return rs
		}
		fmt.Fprintf(w, "\n#### %s\n\n", qpsName(q))
		fmt.Fprintln(w, "| variant | burst pods/s | CPU per pod | steady pods/s | scheduling p50 | scheduling p99 | created→bound p50 | created→bound p99 | evaluations | misplaced pods |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, v := range o.variants {
			rs := of(v)
			fmt.Fprintf(w, "| %s | %.1f | %s | %.1f | %s | %s | %s | %s | %.0f | %d |\n", variantDescriptions[v],
				median(rs, func(r runResult) float64 { return r.rate }),
				ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.cpuPerPod) }))),
				median(rs, func(r runResult) float64 { return r.steady }),
				ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.sched[0]) }))),
				ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.sched[1]) }))),
				ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.e2e[0]) }))),
				ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.e2e[1]) }))),
				median(rs, func(r runResult) float64 { return r.calls }),
				int(median(rs, func(r runResult) float64 { return float64(r.misplaced) })))
		}
		a, d := of("plugin"), of("affinity")
		if len(a) == len(d) && len(a) > 0 {
			var ratios, diffs []float64
			for i := range a {
				ratios = append(ratios, a[i].rate/d[i].rate)
				diffs = append(diffs, float64(a[i].sched[1]-d[i].sched[1]))
			}
			fmt.Fprintf(w, "\n(a) against (d), medians of the rounds: burst throughput %.2f× (rounds: %s); steady scheduling p99 %+.2f ms (rounds: %s)\n",
				middle(ratios), list(ratios, "%.2f"), middle(diffs)/1e6, list(scale(diffs, 1e-6), "%+.2f"))
		}
		fmt.Fprintln(w, "\nMean time per call over the whole run, median of the rounds, from the scheduler's and the plugin's histograms:")
		fmt.Fprintln(w)
		fmt.Fprintln(w, breakdownHeader())
		fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(breakdownKeys)+1))
		for _, v := range o.variants {
			rs := of(v)
			fmt.Fprintf(w, "| %s |", variantDescriptions[v])
			for _, k := range breakdownKeys {
				if _, ok := rs[0].means[k]; ok {
					fmt.Fprintf(w, " %s |", ms(time.Duration(median(rs, func(r runResult) float64 { return float64(r.means[k]) }))))
				} else {
					fmt.Fprint(w, " — |")
				}
			}
			fmt.Fprintln(w)
		}
	}
}

// median returns the median of key over rs.
func median(rs []runResult, key func(runResult) float64) float64 {
	var vs []float64
	for _, r := range rs {
		vs = append(vs, key(r))
	}
	return middle(vs)
}

func middle(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if len(vs)%2 == 0 {
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return vs[len(vs)/2]
}

func scale(vs []float64, f float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * f
	}
	return out
}

func list(vs []float64, format string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
