package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// descriptions and goals of the measures, and the baseline each is
// compared with.
var (
	descriptions = map[string]string{
		mNodeRead:   "node read: quorum GET of the Node",
		mRead:       "fresh read: quorum GET of a node's Passed NodeSecurityState",
		mChallenge:  "re-challenge: `POST /v1/challenge/<node>`, Passed",
		mSignatures: "signature checks: VCEK certificate ← ASK, report ← VCEK",
		mVerify:     "`Verifier.Verify` of one lab SEV-SNP report",
		mWrites:     "this process writes the states, 8 at a time",
		mController: "the controller attests every node, 8 at a time",
	}
	goals     = map[string]string{mRead: "p99 < 2 ms", mChallenge: "p99 < 100 ms"}
	baselines = map[string]string{mRead: mNodeRead, mChallenge: mRead, mVerify: mSignatures, mController: mWrites}
)

// report prints the medians over rounds as Markdown.
func report(w io.Writer, o *options, env string, start time.Time, cold time.Duration, rounds []round) {
	fmt.Fprintf(w, "%s; started %s\n\n", env, start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "First attestation of all %d nodes after the controller started (leader election and cache sync included): %s\n\n", o.nodes, ms(cold))
	fmt.Fprintln(w, "One request at a time; medians over rounds of each round's percentiles, and of the ratio to the baseline within each round:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measure | p50 | p90 | p99 | goal | baseline | p50 ÷ baseline | p99 ÷ baseline |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
	for _, name := range latencyMeasures {
		at := func(p float64) func(r round) float64 {
			return func(r round) float64 { return float64(pct(r.samples[name], p)) }
		}
		base, ratio50, ratio99 := "—", "—", "—"
		if bn := baselines[name]; bn != "" {
			base = bn
			ratio50 = ratio(rounds, at(50), func(r round) float64 { return float64(pct(r.samples[bn], 50)) })
			ratio99 = ratio(rounds, at(99), func(r round) float64 { return float64(pct(r.samples[bn], 99)) })
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", descriptions[name],
			msOf(rounds, at(50)), msOf(rounds, at(90)), msOf(rounds, at(99)), orDash(goals[name]), base, ratio50, ratio99)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "All %d nodes' states deleted, then written anew (medians over rounds; CPU in seconds, heap in MiB):\n\n", o.nodes)
	fmt.Fprintln(w, "| pass | time | nodes/s | CPU, this process | CPU, kube-apiserver + etcd | CPU, attesters | peak heap objects | heap in use after GC | time ÷ baseline |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, name := range fleetMeasures {
		of := func(f func(p pass) float64) float64 {
			return median(rounds, func(r round) float64 { return f(r.fleet[name]) })
		}
		took := func(r round) float64 { return r.fleet[name].took.Seconds() }
		times := "—"
		if bn := baselines[name]; bn != "" {
			times = ratio(rounds, took, func(r round) float64 { return r.fleet[bn].took.Seconds() })
		}
		fmt.Fprintf(w, "| %s | %.2f s | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f | %s |\n", descriptions[name],
			median(rounds, took), median(rounds, func(r round) float64 { return float64(o.nodes) / took(r) }),
			of(func(p pass) float64 { return p.selfCPU.Seconds() }), of(func(p pass) float64 { return p.apiCPU.Seconds() }),
			of(func(p pass) float64 { return p.attesterCPU.Seconds() }), of(func(p pass) float64 { return float64(p.peakHeap >> 20) }),
			of(func(p pass) float64 { return float64(p.heap >> 20) }), times)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every round (in round order; p99 in ms, passes in s):")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| round | load average before → after |")
	for _, name := range latencyMeasures {
		fmt.Fprintf(w, " %s p99 |", name)
	}
	for _, name := range fleetMeasures {
		fmt.Fprintf(w, " %s |", name)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| ---: | --- |")
	for range len(latencyMeasures) + len(fleetMeasures) {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for i, r := range rounds {
		fmt.Fprintf(w, "| %d | %s → %s |", i+1, r.loadBefore, r.loadAfter)
		for _, name := range latencyMeasures {
			fmt.Fprintf(w, " %.2f |", float64(pct(r.samples[name], 99))/float64(time.Millisecond))
		}
		for _, name := range fleetMeasures {
			fmt.Fprintf(w, " %.2f |", r.fleet[name].took.Seconds())
		}
		fmt.Fprintln(w)
	}
}

// median is the median over rounds of f.
func median(rounds []round, f func(round) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ratio is the median over rounds of f ÷ base within each round: rounds
// share the machine's state, so the ratio within a round is steadier than
// the ratio of medians.
func ratio(rounds []round, f, base func(round) float64) string {
	return fmt.Sprintf("%.1f×", median(rounds, func(r round) float64 { return f(r) / base(r) }))
}

func msOf(rounds []round, f func(round) float64) string { return ms(time.Duration(median(rounds, f))) }

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
