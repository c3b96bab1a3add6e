package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/xila-guard/xila-guard/bench/internal/openloop"
)

// descriptions of the measures, and the goal of the issue.
var (
	descriptions = map[string]string{
		mRelease:      "key release: auth + attest (TokenReview) + GET resource (evidence re-read, evaluation, JWE), fresh session each",
		mReleaseFloor: "baseline: TokenReview + GET pod + GET NodeSecurityState, direct",
		mResource:     "resource in a session: GET resource on an attested session",
		mReadsFloor:   "baseline: GET pod + GET Node + GET NodeSecurityState, direct",
	}
	goals = map[string]time.Duration{mRelease: 20 * time.Millisecond}
)

// ok is the samples that succeeded.
func ok(p pass) []openloop.Sample {
	out := make([]openloop.Sample, 0, len(p.samples))
	for _, s := range p.samples {
		if s.Err == nil {
			out = append(out, s)
		}
	}
	return out
}

func fromSlot(s openloop.Sample) time.Duration { return s.FromSlot }
func fromSend(s openloop.Sample) time.Duration { return s.FromSend }
func late(s openloop.Sample) time.Duration     { return s.Late }

// pct is the p-th percentile of the pass's successful requests, from
// their slots.
func pct(p pass, q float64) time.Duration { return openloop.Percentile(ok(p), q, fromSlot) }

func maxOf(p pass, key func(openloop.Sample) time.Duration) time.Duration {
	var m time.Duration
	for _, s := range p.samples {
		m = max(m, key(s))
	}
	return m
}

func errorsOf(p pass) int { return openloop.Errors(p.samples) }

// median is the median over rounds of f, the mean of the middle two for an
// even number of rounds.
func median(rounds []round, f func(round) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

func worst(rounds []round, f func(round) float64) float64 {
	var m float64
	for _, r := range rounds {
		m = max(m, f(r))
	}
	return m
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func msf(v float64) string { return ms(time.Duration(v)) }

// report prints the results as Markdown.
func report(w io.Writer, o *options, env string, start time.Time, rounds []round) {
	at := func(m string, q float64) func(round) float64 {
		return func(r round) float64 { return float64(pct(r.passes[m], q)) }
	}
	fmt.Fprintf(w, "%s; started %s\n\n", env, start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, "Latency from each request's scheduled slot to its answer, successful requests only; medians over rounds of each round's percentiles, and of the ratio to the baseline within each round; max and errors over all rounds:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measure | p50 | p99 | worst round's p99 | max | errors / requests | p50 − baseline | p50 ÷ baseline | p99 ÷ baseline |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, m := range measures {
		var errs, n int
		var top time.Duration
		for _, r := range rounds {
			errs, n, top = errs+errorsOf(r.passes[m]), n+len(r.passes[m].samples), max(top, maxOf(r.passes[m], fromSlot))
		}
		diff, r50, r99 := "—", "—", "—"
		if bn := baselines[m]; bn != "" {
			diff = msf(median(rounds, func(r round) float64 { return at(m, 50)(r) - at(bn, 50)(r) }))
			r50 = fmt.Sprintf("%.1f×", median(rounds, func(r round) float64 { return at(m, 50)(r) / at(bn, 50)(r) }))
			r99 = fmt.Sprintf("%.1f×", median(rounds, func(r round) float64 { return at(m, 99)(r) / at(bn, 99)(r) }))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d / %d | %s | %s | %s |\n", descriptions[m],
			msf(median(rounds, at(m, 50))), msf(median(rounds, at(m, 99))), msf(worst(rounds, at(m, 99))), ms(top), errs, n, diff, r50, r99)
	}
	fmt.Fprintln(w)
	for _, m := range measures {
		g, has := goals[m]
		if !has {
			continue
		}
		p99, wp99 := time.Duration(median(rounds, at(m, 99))), time.Duration(worst(rounds, at(m, 99)))
		verdict := "met"
		switch {
		case p99 >= g:
			verdict = "not met"
		case wp99 >= g:
			verdict = "met at the median, not in every round"
		}
		fmt.Fprintf(w, "Goal for %s, p99 < %s at %d requests/s: **%s** (p99 %s, worst round %s).\n\n", m, ms(g), o.rate, verdict, ms(p99), ms(wp99))
	}
	fmt.Fprintln(w, "Latency from send instead of slot, the load generator's lateness, and CPU per request (medians over rounds; this process is the broker, its cache and the load generator):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measure | p99 from send | generator's worst lateness | CPU per request, this process | CPU per request, kube-apiserver + etcd |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, m := range measures {
		perReq := func(f func(pass) time.Duration) func(round) float64 {
			return func(r round) float64 { return float64(f(r.passes[m])) / float64(max(1, len(r.passes[m].samples))) }
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m,
			msf(median(rounds, func(r round) float64 { return float64(openloop.Percentile(ok(r.passes[m]), 99, fromSend)) })),
			msf(worst(rounds, func(r round) float64 { return float64(maxOf(r.passes[m], late)) })),
			msf(median(rounds, perReq(func(p pass) time.Duration { return p.selfCPU }))),
			msf(median(rounds, perReq(func(p pass) time.Duration { return p.apiCPU }))))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every round, in round order (p99 in ms; the order of the measures changes every round):")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| round | load average before → after |")
	for _, m := range measures {
		fmt.Fprintf(w, " %s p99 |", m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| ---: | --- |")
	for range measures {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for i, r := range rounds {
		fmt.Fprintf(w, "| %d | %s → %s |", i+1, r.loadBefore, r.loadAfter)
		for _, m := range measures {
			fmt.Fprintf(w, " %.2f |", float64(pct(r.passes[m], 99))/float64(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
}
