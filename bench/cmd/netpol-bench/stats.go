package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// settle reads one stream's verdict changes against the verdict it should
// reach after t0.
type settle struct {
	// at is when the first probe of the final run of the wanted verdict
	// started, relative to t0. Probes are compared in the order they
	// started, so an early isolated probe with the wanted verdict (a flap)
	// does not count: the time is that of the run that lasted.
	at time.Duration
	// reached: the stream ended on the wanted verdict.
	reached bool
	// fromFirst: the very first probe already had the wanted verdict, so
	// at is only an upper bound (the time the stream started).
	fromFirst bool
	// flaps counts earlier runs of the wanted verdict that did not last.
	flaps int
	// wrong is how long the stream showed another verdict after having
	// had the wanted one (a window, for example, where a new pod was
	// reachable by a peer its policy does not admit).
	wrong time.Duration
	// first and last are the stream's first and last verdicts.
	first, last string
}

func analyze(h []change, want string, t0 time.Time) settle {
	var s settle
	if len(h) == 0 {
		return s
	}
	s.first, s.last = h[0].v, h[len(h)-1].v
	s.reached = s.last == want
	s.fromFirst = h[0].v == want
	runs := 0
	var left *time.Time // when the stream last left the wanted verdict
	for i, c := range h {
		switch {
		case c.v == want:
			runs++
			if left != nil {
				s.wrong += c.t.Sub(*left)
				left = nil
			}
		case i > 0 && h[i-1].v == want:
			t := c.t
			left = &t
		}
	}
	if s.reached {
		s.at = h[len(h)-1].t.Sub(t0)
		s.flaps = runs - 1
	}
	return s
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(p*float64(len(ds))+0.5) - 1
	i = min(max(i, 0), len(ds)-1)
	return ds[i]
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
}

// summary is one row: the distribution of one kind of sample in one round.
type summary struct {
	n, missing              int
	p50, p90, p99, max, min time.Duration
}

func summarize(ds []time.Duration, missing int) summary {
	s := slices.Clone(ds)
	slices.Sort(s)
	out := summary{n: len(s), missing: missing}
	if len(s) > 0 {
		out.p50, out.p90, out.p99, out.max, out.min = quantile(s, .5), quantile(s, .9), quantile(s, .99), s[len(s)-1], s[0]
	}
	return out
}

func (s summary) cells() string {
	return fmt.Sprintf("%d | %d | %s | %s | %s | %s | %s", s.n, s.missing, ms(s.min), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max))
}

const summaryHeader = "n | not reached | min | p50 | p90 | p99 | max"

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, " ")
}
