package wire_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/internal/benchdata"
	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

var benchSizes = []int{1, 100, 5000}

// benchmarkDecode runs decode on the encoded benchmark request of each
// size, 8 GPUs per node.
func benchmarkDecode(b *testing.B, decode func(body []byte) error) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body := wire.AppendRequest(nil, benchdata.Request(nodes, 8, time.Now()))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeEvaluateRequest measures decoding and validation, the
// server's share of a request before evaluation.
func BenchmarkDecodeEvaluateRequest(b *testing.B) {
	benchmarkDecode(b, func(body []byte) error {
		_, err := wire.DecodeEvaluateRequest(body, wire.Limits{})
		return err
	})
}

// BenchmarkDecodeReflective is the baseline of
// BenchmarkDecodeEvaluateRequest: the same validation after the reflective
// strict decoder.
func BenchmarkDecodeReflective(b *testing.B) {
	benchmarkDecode(b, func(body []byte) error {
		_, err := wire.DecodeReflective(body, wire.Limits{})
		return err
	})
}

// BenchmarkStdlibDecode is a second baseline: encoding/json into the same
// types, without validation.
func BenchmarkStdlibDecode(b *testing.B) {
	benchmarkDecode(b, func(body []byte) error {
		var req wire.EvaluateRequest
		return json.Unmarshal(body, &req)
	})
}

// BenchmarkAppendRequest measures the client's encoding of a request.
func BenchmarkAppendRequest(b *testing.B) {
	for _, nodes := range benchSizes {
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

// benchAnswer returns the evaluator's answer to the benchmark request.
func benchAnswer(b *testing.B, nodes int) *wire.EvaluateResponse {
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileProduction})
	if err != nil {
		b.Fatal(err)
	}
	return ev.Evaluate(benchdata.Request(nodes, 1, time.Now()))
}

// BenchmarkAppendResponse measures the server's encoding of an answer.
func BenchmarkAppendResponse(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			resp := benchAnswer(b, nodes)
			buf := wire.AppendResponse(nil, resp)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = wire.AppendResponse(buf[:0], resp)
			}
		})
	}
}

// BenchmarkStdlibEncodeResponse is the baseline of BenchmarkAppendResponse:
// encoding/json, which the server used before.
func BenchmarkStdlibEncodeResponse(b *testing.B) {
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

// BenchmarkDecodeEvaluateResponse measures the client's decoding of an
// answer.
func BenchmarkDecodeEvaluateResponse(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body := string(wire.AppendResponse(nil, benchAnswer(b, nodes)))
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

// BenchmarkDecodeResponseReflective is the baseline of
// BenchmarkDecodeEvaluateResponse: the reflective strict decoder the
// client used before.
func BenchmarkDecodeResponseReflective(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body := wire.AppendResponse(nil, benchAnswer(b, nodes))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var resp wire.EvaluateResponse
				if err := strictjson.Unmarshal(body, &resp, strictjson.IgnoreUnknownFields()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRequestDecoder measures a reused decoder, as the server uses
// it, on a body it does not copy; its baseline is
// BenchmarkDecodeEvaluateRequest.
func BenchmarkRequestDecoder(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			body := string(wire.AppendRequest(nil, benchdata.Request(nodes, 8, time.Now())))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var d wire.RequestDecoder
			for b.Loop() {
				if _, err := d.Decode(body, wire.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
