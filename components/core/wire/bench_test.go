package wire_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/benchdata"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

var benchSizes = []int{1, 100, 5000}

// BenchmarkDecodeEvaluateRequest measures strict decoding and validation,
// the server's share of a request before evaluation, with 8 GPUs per node.
func BenchmarkDecodeEvaluateRequest(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body, err := json.Marshal(benchdata.Request(nodes, 8, time.Now()))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.DecodeEvaluateRequest(body, wire.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchAnswer returns the evaluator's answer to the benchmark request.
func benchAnswer(b *testing.B, nodes int) *wire.EvaluateResponse {
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileProduction})
	if err != nil {
		b.Fatal(err)
	}
	return ev.Evaluate(benchdata.Request(nodes, 1, time.Now()))
}

// BenchmarkEncodeResponse measures the server's encoding of an answer.
func BenchmarkEncodeResponse(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			resp := benchAnswer(b, nodes)
			buf, _ := json.Marshal(resp)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeEvaluateResponse measures a client's decoding of an
// answer.
func BenchmarkDecodeEvaluateResponse(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body, _ := json.Marshal(benchAnswer(b, nodes))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.DecodeEvaluateResponse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
