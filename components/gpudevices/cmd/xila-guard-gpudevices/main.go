// Command xila-guard-gpudevices is the GPU controller for KubeVirt VMs: it
// protects GPU classes and devices, records which VMI holds each device and
// keeps the settings the admission policies read.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xila-guard/xila-guard/components/gpudevices/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "xila-guard-gpudevices:", err)
		os.Exit(1)
	}
}
