package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

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
	results := map[string][]runResult{}
	for run := range o.runs {
		for _, v := range o.variants {
			r, err := runVariant(ctx, o, c, example, v, run+1)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "round %d %-11s %7.1f pods/s, CPU %s/pod, p50 %s p99 %s; paced p50 %s p99 %s; %.0f evaluations, %d misplaced\n",
				run+1, v, r.rate, ms(r.cpuPerPod), ms(r.p50), ms(r.p99), ms(r.paced[0]), ms(r.paced[1]), r.calls, r.misplaced)
			results[v] = append(results[v], r)
		}
	}
	report(os.Stdout, o, results)
	return nil
}

// report prints, for each variant, the median of its runs: throughput,
// latency, CPU and evaluations. "vs (b)" is the median over the rounds
// of the throughput ratio to (b) in the same round, since runs of one
// round share the machine's load.
func report(w io.Writer, o *options, results map[string][]runResult) {
	median := map[string]runResult{}
	for v, rs := range results {
		median[v] = medianBy(rs, func(r runResult) float64 { return r.rate })
		latency := medianBy(rs, func(r runResult) float64 { return float64(r.paced[0]) })
		m := median[v]
		m.paced = latency.paced
		m.cpuPerPod = medianBy(rs, func(r runResult) float64 { return float64(r.cpuPerPod) }).cpuPerPod
		median[v] = m
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "%d nodes (%d in %d pools), %d pods (%.0f%% protected), then %d more at %.0f/s; %d round(s), medians shown; %d CPUs, load %s\n\n",
		o.nodes, o.poolNodes, o.tenants, o.pods, o.protected*100, o.pacedPods, o.pacedRate, o.runs, runtime.NumCPU(),
		strings.Fields(string(load) + " ?")[0])
	fmt.Fprintln(w, "| variant | pods/s | vs (b) | CPU per pod | p50 | p99 | paced p50 | paced p99 | evaluations | misplaced pods |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, v := range o.variants {
		r := median[v]
		fmt.Fprintf(w, "| %s | %.1f | %s | %s | %s | %s | %s | %s | %.0f | %d |\n", variantDescriptions[v], r.rate,
			ratio(results[v], results["stock"]), ms(r.cpuPerPod), ms(r.p50), ms(r.p99), ms(r.paced[0]), ms(r.paced[1]), r.calls, r.misplaced)
	}
	fmt.Fprintln(w, "\nMean time per call in the median run, from the scheduler's and the plugin's histograms:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, breakdownHeader())
	fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(breakdownKeys)+1))
	for _, v := range o.variants {
		fmt.Fprintf(w, "| %s |", variantDescriptions[v])
		for _, k := range breakdownKeys {
			if d, ok := median[v].means[k]; ok {
				fmt.Fprintf(w, " %s |", ms(d))
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		fmt.Fprintln(w)
	}
}

// medianBy returns the run with the median value of key.
func medianBy(rs []runResult, key func(runResult) float64) runResult {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b runResult) int { return cmp.Compare(key(a), key(b)) })
	return sorted[len(sorted)/2]
}

// ratio is the median over rounds of a's throughput over base's.
func ratio(a, base []runResult) string {
	if len(base) == 0 || len(a) != len(base) {
		return "—"
	}
	var rs []float64
	for i := range a {
		rs = append(rs, a[i].rate/base[i].rate)
	}
	slices.Sort(rs)
	return fmt.Sprintf("%.0f%%", 100*rs[len(rs)/2])
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
