// Command xila-guard-gpudevices is the GPU controller for KubeVirt VMs: it
// protects GPU classes and devices, records which VMI holds each device and
// keeps the settings the admission policies read.
//
// `xila-guard-gpudevices lab-device-plugin --resource NAME --count N` runs
// instead a kubelet device plugin that advertises N devices of NAME and
// allocates them without hardware: a lab stand-in for kind clusters,
// which the chart never deploys.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/xila-guard/xila-guard/components/gpudevices/app"
	"github.com/xila-guard/xila-guard/components/gpudevices/labplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := app.Run
	name := "xila-guard-gpudevices"
	if len(os.Args) > 1 && os.Args[1] == "lab-device-plugin" {
		run, name = labDevicePlugin, name+" lab-device-plugin"
		os.Args = os.Args[1:]
	}
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

func labDevicePlugin(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab-device-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := &labplugin.Plugin{Log: slog.New(slog.NewJSONHandler(stderr, nil))}
	fs.StringVar(&p.Resource, "resource", "", "extended resource name to advertise, e.g. example.com/gpu")
	fs.IntVar(&p.Count, "count", 1, "number of devices to advertise")
	fs.StringVar(&p.Dir, "dir", "", "kubelet device-plugin directory; empty for the kubelet's default")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return p.Run(ctx)
}
