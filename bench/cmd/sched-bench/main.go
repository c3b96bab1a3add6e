// Command sched-bench measures what XilaGuardEnforcement costs. Against a
// real kube-apiserver and etcd (envtest assets), it creates Node objects —
// some in tenant pools, with their NodeSecurityStates — and pods, half of
// them protected, and lets variants of xila-guard-scheduler, with the
// evaluator linked in, place them all:
//
//   - plugin (a): the example configuration, with the plugin;
//   - every-cycle (a′): the same without answer reuse, one evaluation per
//     cycle;
//   - stock (b): the same binary with the plugin disabled (and the stock
//     TaintToleration filter back).
//
// It prints pods/s and the p50/p99 scheduling latency of each, the time
// from a pod's PreFilter to the end of its bind, as a Markdown table
// (docs/benchmarks/scheduler.md):
//
//	go run ./components/scheduler/cmd/sched-bench --runs 3
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
