// Command webhook-load measures the admission webhook's latency under load
// on loopback: it serves the real handler over HTTPS, backed by a fixed
// cluster and a real xila-guard-core, and sends AdmissionReviews at fixed
// rates (open loop: a request leaves at its slot whether or not earlier
// ones have answered, and its latency counts from when it left; how late
// the generator was is reported beside it). A baseline
// handler that answers a constant review over the same TLS stack runs in
// the same process, so the report separates the webhook's own cost from
// the transport's.
//
//	go run ./components/webhook/cmd/webhook-load --core-bin _output/bin/xila-guard-core
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

type options struct {
	coreBin  string
	coreURL  string
	rates    []int
	duration time.Duration
	warmup   time.Duration
	runs     int
}

func main() {
	o := options{}
	var rates string
	flag.StringVar(&o.coreBin, "core-bin", "_output/bin/xila-guard-core", "xila-guard-core binary to start on loopback (ignored with --core-url)")
	flag.StringVar(&o.coreURL, "core-url", "", "evaluator to use instead of starting --core-bin")
	flag.StringVar(&rates, "rates", "200,1000", "comma-separated request rates per second")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per scenario, rate and run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measurement")
	flag.IntVar(&o.runs, "runs", 3, "runs per scenario and rate; the report gives medians over runs")
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
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "webhook-load: %v\n", err)
		os.Exit(1)
	}
}
