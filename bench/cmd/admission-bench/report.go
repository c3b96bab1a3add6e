package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// report prints the medians over rounds as Markdown tables: the client's
// view, the API server's and the webhook's metrics, CPU per request, and
// every round's p50 and p99.
func report(w io.Writer, o *options, results map[setting][]measurement, env, loadBefore, loadAfter string) {
	fmt.Fprintf(w, "%s; load average %s before, %s after\n\n", env, loadBefore, loadAfter)
	each := func(f func(s setting, ms []measurement)) {
		for _, mode := range o.modes {
			for _, rate := range o.rates {
				for _, v := range o.variants {
					s := setting{mode, rate, v}
					f(s, results[s])
				}
			}
		}
	}
	fmt.Fprintln(w, "Latency from each request's slot to its answer, as the client sees it (medians over rounds):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | rate | variant | achieved | p50 | p99 | p99 − CEL's | generator late, p99 | failed |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	each(func(s setting, rs []measurement) {
		failed, sent := 0, 0
		for _, r := range rs {
			failed += r.failed
			sent += r.sent
		}
		fmt.Fprintf(w, "| %s | %d/s | %s | %.0f/s | %s | %s | %s | %s | %d / %d |\n", s.mode, s.rate, variantDescriptions[s.variant],
			medianF(rs, func(m measurement) float64 { return m.achieved }),
			ms(median(rs, func(m measurement) time.Duration { return m.p50 })),
			ms(median(rs, func(m measurement) time.Duration { return m.p99 })),
			overCEL(s, results), ms(median(rs, func(m measurement) time.Duration { return m.lateP99 })), failed, sent)
	})
	fmt.Fprintln(w)
	// The API server records a policy's check duration only for denials
	// and evaluation errors, so an admitted pod's CEL cost shows only in
	// the validating step.
	fmt.Fprintln(w, "The API server's and the webhook's own metrics, mean (and the histogram bucket of the p99, or the interpolated p99 for the webhook's finer buckets):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | rate | variant | POST pods | validating admission step | webhook call | webhook handler | handler p99 | API server → webhook connections | webhook GCs |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	each(func(s setting, rs []measurement) {
		hist := func(f func(m measurement) histogram) string {
			if medianF(rs, func(m measurement) float64 { return f(m).count }) == 0 {
				return "—"
			}
			mid := medianBy(rs, func(m measurement) float64 { return float64(f(m).mean()) })
			return fmt.Sprintf("%s (%s)", ms(f(mid).mean()), f(mid).bound(0.99))
		}
		handler, handlerP99 := "—", "—"
		if hookNames[s.variant] != "" {
			handler = us(median(rs, func(m measurement) time.Duration { return m.handler.mean() }))
			handlerP99 = us(median(rs, func(m measurement) time.Duration { return m.handler.quantile(0.99) }))
		}
		fmt.Fprintf(w, "| %s | %d/s | %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n", s.mode, s.rate, variantDescriptions[s.variant],
			hist(func(m measurement) histogram { return m.request }), hist(func(m measurement) histogram { return m.validate }),
			hist(func(m measurement) histogram { return m.webhookCall }), handler, handlerP99,
			medianF(rs, func(m measurement) float64 { return float64(m.conns) }), medianF(rs, func(m measurement) float64 { return m.gcs }))
	})
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CPU time per request (medians over rounds):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | rate | variant | kube-apiserver | etcd | webhook | generator | generator's new connections |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	each(func(s setting, rs []measurement) {
		cpu := func(p string) string { return us(median(rs, func(m measurement) time.Duration { return m.cpu[p] })) }
		fmt.Fprintf(w, "| %s | %d/s | %s | %s | %s | %s | %s | %.0f |\n", s.mode, s.rate, variantDescriptions[s.variant],
			cpu(processAPIServer), cpu(processEtcd), cpu(processWebhook), cpu(processGenerator),
			medianF(rs, func(m measurement) float64 { return float64(m.generatorDials) }))
	})
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every round (in round order):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | rate | variant | p50 per round (ms) | p99 per round (ms) |")
	fmt.Fprintln(w, "| --- | ---: | --- | --- | --- |")
	each(func(s setting, rs []measurement) {
		list := func(f func(m measurement) time.Duration) string {
			var out []string
			for _, r := range rs {
				out = append(out, fmt.Sprintf("%.2f", float64(f(r))/float64(time.Millisecond)))
			}
			return strings.Join(out, ", ")
		}
		fmt.Fprintf(w, "| %s | %d/s | %s | %s | %s |\n", s.mode, s.rate, variantDescriptions[s.variant],
			list(func(m measurement) time.Duration { return m.p50 }), list(func(m measurement) time.Duration { return m.p99 }))
	})
}

// overCEL is the median over rounds of the setting's p99 minus the CEL
// policy's p99 in the same round: rounds share the machine's state, so the
// difference within a round is steadier than the difference of medians.
func overCEL(s setting, results map[setting][]measurement) string {
	cel := results[setting{s.mode, s.rate, variantCEL}]
	rs := results[s]
	if s.variant == variantCEL || len(cel) != len(rs) || len(rs) == 0 {
		return "—"
	}
	d := make([]time.Duration, len(rs))
	for i := range rs {
		d[i] = rs[i].p99 - cel[i].p99
	}
	slices.Sort(d)
	return fmt.Sprintf("%+.2f ms", float64(d[len(d)/2])/float64(time.Millisecond))
}

func median(rs []measurement, f func(measurement) time.Duration) time.Duration {
	if len(rs) == 0 {
		return 0
	}
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func medianF(rs []measurement, f func(measurement) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// medianBy returns the measurement with the median value of key.
func medianBy(rs []measurement, key func(measurement) float64) measurement {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b measurement) int {
		switch ka, kb := key(a), key(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return sorted[len(sorted)/2]
}
