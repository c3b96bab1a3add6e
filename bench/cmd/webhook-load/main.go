// Command webhook-load measures the admission webhook's latency under load
// on loopback: it serves the real handler over HTTPS, backed by a fixed
// cluster and the in-process evaluator, and sends AdmissionReviews at fixed
// rates (open loop: a request leaves at its slot whether or not earlier
// ones have answered, and its latency counts from when it left; how late
// the generator was is reported beside it). A baseline
// handler that answers a constant review over the same TLS stack runs in
// the same process, so the report separates the webhook's own cost from
// the transport's.
//
//	go run ./bench/cmd/webhook-load
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

type options struct {
	rates    []int
	duration time.Duration
	warmup   time.Duration
	runs     int
	// goDefaults leaves this process's collector at Go's defaults instead
	// of the chart's settings for the webhook.
	goDefaults bool
	// cpuProfile, when set, is where a CPU profile of the whole run goes.
	cpuProfile string
}

func main() {
	o := options{}
	var rates string
	flag.StringVar(&rates, "rates", "200,1000", "comma-separated request rates per second")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per scenario, rate and run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measurement")
	flag.IntVar(&o.runs, "runs", 3, "runs per scenario and rate; the report gives medians over runs")
	flag.BoolVar(&o.goDefaults, "go-defaults", false, "run the webhook with Go's collector defaults instead of the chart's GOGC and GOMEMLIMIT")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the load generator and the webhook to this file")
	flag.Parse()
	for _, r := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "webhook-load: invalid rate %q\n", r)
			os.Exit(2)
		}
		o.rates = append(o.rates, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := profiled(o.cpuProfile, func() error { return run(ctx, o) }); err != nil {
		fmt.Fprintf(os.Stderr, "webhook-load: %v\n", err)
		os.Exit(1)
	}
}

// profiled runs f, with the CPU profiled into path when path is set.
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return err
	}
	err = f()
	pprof.StopCPUProfile()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
