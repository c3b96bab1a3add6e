package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the command-line settings of admission-bench.
type options struct {
	rates            []int
	modes            []string
	variants         []string
	rounds           int
	duration, warmup time.Duration
	tenants, conns   int
	assets, crds     string
	webhookBin       string
	goDefaults       bool
	webhookProcs     int
	perfDir          string
}

// Modes: dry-run creates are admitted and answered but not stored; real
// ones are stored in etcd and deleted again after each measurement.
const (
	modeDryRun = "dry-run"
	modeReal   = "real"
)

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("admission-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rates := fs.String("rates", "200,1000", "comma-separated pod CREATEs per second")
	modes := fs.String("modes", modeDryRun+","+modeReal, "comma-separated: "+modeDryRun+" (dryRun=All) and "+modeReal+" (stored, then deleted)")
	variants := fs.String("variants", strings.Join(variantNames[:3], ","), "comma-separated variants, of "+strings.Join(variantNames, ", ")+"; they alternate within each round")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; the report gives medians over rounds")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per mode, rate, variant and round")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load at the same rate before each measurement")
	fs.IntVar(&o.tenants, "tenants", 20, "tenants, each with a namespace, a TenantBinding and a PlacementPolicy; requests go round robin over their namespaces")
	fs.IntVar(&o.conns, "conns", 16, "HTTP/2 connections of the generator to the API server, used round robin")
	fs.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, or _output/envtest)")
	fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
	fs.StringVar(&o.webhookBin, "webhook-bin", "", "the xila-guard-webhook binary; empty builds it from components/webhook/cmd/xila-guard-webhook")
	fs.BoolVar(&o.goDefaults, "webhook-go-defaults", false, "run the webhook with Go's collector defaults instead of the chart's GOGC and GOMEMLIMIT")
	fs.IntVar(&o.webhookProcs, "webhook-gomaxprocs", 0, "GOMAXPROCS of the webhook processes; 0 leaves Go's default (the CPUs it may use)")
	fs.StringVar(&o.perfDir, "perf-dir", "", "record the webhook process with perf during each webhook measurement, to <dir>/<mode>-<rate>-<round>.data")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.assets == "" {
		o.assets = "_output/envtest"
	}
	var errs []error
	for _, r := range strings.Split(*rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("--rates: %q is not a positive integer", r))
		}
		o.rates = append(o.rates, n)
	}
	o.modes = strings.Split(*modes, ",")
	for _, m := range o.modes {
		if m != modeDryRun && m != modeReal {
			errs = append(errs, fmt.Errorf("--modes: unknown mode %q", m))
		}
	}
	o.variants = strings.Split(*variants, ",")
	for _, v := range o.variants {
		if !slices.Contains(variantNames, v) {
			errs = append(errs, fmt.Errorf("--variants: unknown variant %q, want some of %s", v, strings.Join(variantNames, ", ")))
		}
	}
	if o.rounds < 1 || o.tenants < 1 || o.conns < 1 || o.duration <= 0 || o.warmup < 0 || o.webhookProcs < 0 {
		errs = append(errs, errors.New("want --rounds, --tenants and --conns >= 1, --duration > 0, --warmup and --webhook-gomaxprocs >= 0"))
	}
	return o, errors.Join(errs...)
}
