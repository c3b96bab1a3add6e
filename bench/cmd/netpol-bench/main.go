// Command netpol-bench measures the NetworkPolicy agent by packets on a
// kind cluster (run-on-kind.sh creates one, runs it and deletes the
// cluster). Probes are TCP connections opened from inside the pods'
// network namespaces by a small prober that runs on each node (./prober),
// so every packet crosses the pod's interface and the agent's programs.
//
//	netpol-bench propagation  time from the API write to the first probe
//	                          with the new verdict: policy bursts and pod churn
//	netpol-bench dataplane    request/response and connect/close rates between
//	                          two pods, agent enforcing against no agent
//
// The prober and this program run on the same machine as the kind nodes
// (containers), so they read the same clock: a probe's start time and the
// time an API call returned are directly comparable.
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("netpol-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}
