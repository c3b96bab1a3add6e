// Command xila-guard-agent enforces Kubernetes NetworkPolicy on the pods of
// its node with eBPF. It runs as a DaemonSet with the node's network
// namespace; run it with -h for its flags.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xila-guard/xila-guard/components/agent/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "xila-guard-agent:", err)
		os.Exit(1)
	}
}
