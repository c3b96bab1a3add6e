// Command sched-bench measures what XilaGuardEnforcement costs, side by
// side with the stock scheduler an operator would otherwise run. Against a
// real kube-apiserver and etcd (envtest assets) it creates Node objects —
// tenant pools with their NodeSecurityStates, general nodes, some with
// GPUs, in three zones — and a mix of pods (protected and plain, GPU and
// CPU, some bound to a zone by node affinity), and lets each variant place
// them: a burst created at once, for throughput, then pods arriving
// open-loop at a steady rate, for latency.
//
//   - plugin (a): xila-guard-scheduler from the example configuration;
//   - every-cycle (a′): the same without answer reuse;
//   - stock (b): the same binary with the plugin disabled (and the stock
//     TaintToleration filter back), on the same pods;
//   - affinity (d): the stock scheduler, on pods that carry the node
//     affinity and toleration giving the placement enforcement gives.
//
// Every round runs every variant at every client QPS setting (the chart's,
// and unthrottled) and the report shows medians over the rounds as
// Markdown (docs/benchmarks/scheduler.md):
//
//	go run ./bench/cmd/sched-bench --runs 5
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("sched-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}
