// Command agent-bench measures the NetworkPolicy agent on a live cluster
// where the chart installed it (networkPolicy.enabled=true): it creates
// --pods pods spread over --namespaces namespaces, then --policies
// NetworkPolicies one after the other, and reports how long each took from
// the API server's answer to the create until every agent logged the
// change as enforced (maps switched), with the agents' CPU and memory while
// idle and while policies change.
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("agent-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}
