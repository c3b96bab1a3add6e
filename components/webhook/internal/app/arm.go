package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/xila-guard/xila-guard/components/webhook/internal/arm"
)

// ArmCommand is the subcommand that turns the webhook configurations
// fail-closed once a replica answers (package arm).
const ArmCommand = "arm"

// runArm is `xila-guard-webhook arm`.
func runArm(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name+" "+ArmCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var validating, mutating listFlag
	var o arm.Options
	var kubeconfig string
	fs.Var(&validating, "validating", "ValidatingWebhookConfigurations to arm; comma-separated, repeatable")
	fs.Var(&mutating, "mutating", "MutatingWebhookConfigurations to arm; comma-separated, repeatable")
	fs.DurationVar(&o.Timeout, "timeout", 4*time.Minute, "how long to wait for a replica to answer; the configurations are armed when it passes all the same")
	fs.DurationVar(&o.Interval, "interval", time.Second, "time between two probes")
	fs.StringVar(&o.Dial, "dial", "", "host:port to reach the webhook at instead of its Service (the certificate is still checked for the Service's name)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s --validating NAME[,NAME] [--mutating NAME]\n\nWaits until the webhook answers an AdmissionReview, then sets failurePolicy Fail on every webhook of the configurations.\n\n", Name, ArmCommand)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %s", ArmCommand, strings.Join(fs.Args(), " "))
	}
	o.Validating, o.Mutating = validating.values, mutating.values
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return arm.Run(ctx, kube, o, slog.New(slog.NewJSONHandler(stderr, nil)))
}

// CheckCommand is the subcommand the chart's helm test runs.
const CheckCommand = "check"

// runCheck is `xila-guard-webhook check`.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name+" "+CheckCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o arm.CheckOptions
	var kubeconfig string
	fs.StringVar(&o.Validating, "validating", "", "ValidatingWebhookConfiguration whose webhook must answer an AdmissionReview")
	fs.StringVar(&o.CoreURL, "core-url", "", "base URL of the evaluator API, whose /readyz must answer 200; empty when none runs")
	fs.StringVar(&o.SchedulerNamespace, "scheduler-namespace", "", "namespace of the controlled scheduler's pods")
	fs.StringVar(&o.SchedulerSelector, "scheduler-selector", "", "label selector of the controlled scheduler's pods, each of whose /readyz must answer 200; empty when none runs")
	fs.DurationVar(&o.Timeout, "timeout", 15*time.Second, "how long each probe is retried, every second, until it passes")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	results, err := arm.Check(ctx, kube, o)
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(stdout, "FAIL  %s: %v\n", r.What, r.Err)
		} else {
			fmt.Fprintf(stdout, "ok    %s\n", r.What)
		}
	}
	return err
}
