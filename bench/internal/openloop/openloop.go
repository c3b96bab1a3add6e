// Package openloop drives a load generator open loop: every request is due
// at its slot, one interval after the one before, and leaves then whether
// or not earlier ones have answered. A slow server therefore builds a
// queue of requests in flight, and the latencies show it instead of
// hiding it by sending less (coordinated omission).
package openloop

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Sample is what happened to one request.
type Sample struct {
	// Late is how long after its slot the request left: the generator's
	// own timer and CPU delays.
	Late time.Duration
	// FromSlot is the time from the request's slot to its answer, which
	// includes Late: the latency a client that meant to send at the slot
	// sees.
	FromSlot time.Duration
	// FromSend is the time from when the request left to its answer.
	FromSend time.Duration
	// Err is why the request failed, or nil.
	Err error
}

// Run calls send for requests 0..n-1, request i at start + i/rate, each in
// its own goroutine, and waits for every answer. It stops sending when ctx
// is done; the samples of requests never sent are left out.
func Run(ctx context.Context, rate, n int, send func(i int) error) []Sample {
	interval := time.Second / time.Duration(rate)
	out := make([]Sample, n)
	var wg sync.WaitGroup
	start := time.Now()
	sent := n
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			sent = i
			break
		}
		left := time.Now()
		out[i].Late = left.Sub(due)
		wg.Go(func() {
			err := send(i)
			done := time.Now()
			out[i].FromSlot, out[i].FromSend, out[i].Err = done.Sub(due), done.Sub(left), err
		})
	}
	wg.Wait()
	return out[:sent]
}

// Percentile returns the p-th percentile (0 < p < 100) of what key takes
// from the samples, or 0 for none.
func Percentile(samples []Sample, p float64, key func(Sample) time.Duration) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	v := make([]time.Duration, len(samples))
	for i, s := range samples {
		v[i] = key(s)
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(float64(len(v))*p/100))]
}

// Errors counts the failed samples.
func Errors(samples []Sample) int {
	n := 0
	for _, s := range samples {
		if s.Err != nil {
			n++
		}
	}
	return n
}
