package evaluate

import (
	"fmt"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/benchdata"
)

// BenchmarkEvaluate measures the library alone: no JSON, no HTTP.
func BenchmarkEvaluate(b *testing.B) {
	e := newEvaluator(guard.ProfileProduction)
	for _, gpus := range benchdata.GPUsPerNode {
		for _, nodes := range []int{1, 100, 5000} {
			b.Run(fmt.Sprintf("gpus=%d/nodes=%d", gpus, nodes), func(b *testing.B) {
				req := benchdata.Request(nodes, gpus, now)
				b.ReportAllocs()
				for b.Loop() {
					e.Evaluate(req)
				}
			})
		}
	}
}
