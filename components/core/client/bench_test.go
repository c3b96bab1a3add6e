package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/core/benchdata"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/server"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// BenchmarkEvaluateHTTP measures what a caller sees: the client encodes the
// request, the real server decodes, evaluates and encodes over loopback,
// and the client decodes and checks the answer. It reports p50 and p99.
func BenchmarkEvaluateHTTP(b *testing.B) {
	c := realServerClient(b, evaluate.Options{}, 10*time.Second)
	for _, gpus := range benchdata.GPUsPerNode {
		for _, nodes := range []int{1, 100, 5000} {
			b.Run(fmt.Sprintf("gpus=%d/nodes=%d", gpus, nodes), func(b *testing.B) {
				benchmarkRoundTrip(b, c, benchdata.Request(nodes, gpus, time.Now()))
			})
		}
	}
}

// realServerClient starts the real server with an evaluator of opts on
// loopback for the rest of the test, and returns a client of it.
func realServerClient(tb testing.TB, opts evaluate.Options, timeout time.Duration) *Client {
	tb.Helper()
	ev, err := evaluate.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := server.New(server.Config{Evaluator: ev, MaxRequestBytes: 64 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	c, err := New(hs.URL, WithTimeout(timeout))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// benchmarkRoundTrip sends req repeatedly and reports latency percentiles.
func benchmarkRoundTrip(b *testing.B, c *Client, req *wire.EvaluateRequest) {
	var took []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := c.Evaluate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds()), "p99-µs")
}
