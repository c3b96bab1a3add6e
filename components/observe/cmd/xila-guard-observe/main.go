// Command xila-guard-observe publishes node evidence, taints pool nodes and
// reports pods that run where the evaluator does not allow them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xila-guard/xila-guard/components/observe/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "xila-guard-observe:", err)
		os.Exit(1)
	}
}
