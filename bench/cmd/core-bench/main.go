// Command core-bench measures xila-guard-core's latency over HTTP: it sends
// many requests of each size, one after another or from several workers,
// and prints p50, p90, p99 and the maximum. Without --url it starts an
// evaluator on loopback in the same process.
//
//	core-bench --nodes 1,100,5000 --requests 2000
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("core-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}
