// Command sched-bench measures what XilaGuardEnforcement costs. Against a
// real kube-apiserver and etcd (envtest assets) and the real
// xila-guard-core, it creates Node objects — some in tenant pools, with
// their NodeSecurityStates — and pods, half of them protected, and lets
// variants of xila-guard-scheduler place them all:
//
//   - plugin (a): the example configuration, with the plugin;
//   - every-cycle (a′): the same without answer reuse, one call per cycle;
//   - stock (b): the same binary with the plugin disabled (and the stock
//     TaintToleration filter back);
//   - per-node (c): the plugin asking the evaluator once per node in
//     Filter instead of once per cycle in PreFilter.
//
// It prints pods/s and the p50/p99 scheduling latency of each, the time
// from a pod's PreFilter to the end of its bind, as a Markdown table
// (docs/benchmarks/scheduler.md):
//
//	go build -o _output/bin/xila-guard-core ./components/core/cmd/xila-guard-core
//	go run ./components/scheduler/cmd/sched-bench --core-bin _output/bin/xila-guard-core --runs 3
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sched-bench: %v\n", err)
		os.Exit(1)
	}
}
