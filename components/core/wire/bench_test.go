package wire_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/core/internal/benchdata"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// BenchmarkDecodeEvaluateRequest measures decoding and validation, the
// server's share of a request before evaluation.
func BenchmarkDecodeEvaluateRequest(b *testing.B) {
	for _, nodes := range []int{1, 100, 5000} {
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

// BenchmarkAppendRequest measures the client's encoding of a request.
func BenchmarkAppendRequest(b *testing.B) {
	for _, nodes := range []int{1, 100, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			req := benchdata.Request(nodes, 8, time.Now())
			buf := wire.AppendRequest(nil, req)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = wire.AppendRequest(buf[:0], req)
			}
		})
	}
}

// BenchmarkStdlibDecode is the baseline: encoding/json into the same types.
func BenchmarkStdlibDecode(b *testing.B) {
	for _, nodes := range []int{1, 100, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body, _ := json.Marshal(benchdata.Request(nodes, 8, time.Now()))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var req wire.EvaluateRequest
				if err := json.Unmarshal(body, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
