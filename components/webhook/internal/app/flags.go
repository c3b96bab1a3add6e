package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// Name is the command's and the image's name.
const Name = "xila-guard-webhook"

// DefaultBinder is the service account of the controlled scheduler as the
// chart installs it.
const DefaultBinder = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"

// options are the command-line settings of xila-guard-webhook.
type options struct {
	listen             string
	metricsListen      string
	tlsCertFile        string
	tlsKeyFile         string
	tlsCheckInterval   time.Duration
	kubeconfig         string
	poolLabel          string
	trusted            listFlag
	daemonSetCreators  listFlag
	externalSchedulers listFlag
	schedulerProfiles  profileFlag
	binders            listFlag
	reportBinders      listFlag
	recordBinders      listFlag
	profile            string
	shutdownTimeout    time.Duration
	shutdownDelay      time.Duration
	logLevel           slog.Level
	devices            bool
	gpuSettings        string
	version            bool
}

// profileFlag collects --scheduler-profile NAME=SELECTOR; repeatable.
type profileFlag struct {
	values map[string][]string
}

func (p *profileFlag) String() string { return fmt.Sprint(p.values) }

func (p *profileFlag) Set(s string) error {
	name, sel, ok := strings.Cut(s, "=")
	name, sel = strings.TrimSpace(name), strings.TrimSpace(sel)
	if !ok || name == "" || sel == "" {
		return fmt.Errorf("%q: want <scheduler name>=<label selector>, e.g. volcano=volcano.sh/job-name", s)
	}
	if p.values == nil {
		p.values = map[string][]string{}
	}
	p.values[name] = append(p.values[name], sel)
	return nil
}

// listFlag is a comma-separated list; repeating the flag appends.
type listFlag struct {
	values []string
	set    bool
}

func (l *listFlag) String() string { return strings.Join(l.values, ",") }

// Set replaces the default on first use, then appends.
func (l *listFlag) Set(s string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			l.values = append(l.values, v)
		}
	}
	return nil
}

// parseFlags reads args. Usage errors and -h are written to stderr.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{binders: listFlag{values: []string{DefaultBinder}}}
	poolDefault := guard.LabelTenantPool
	if env := os.Getenv(guard.EnvPoolLabel); env != "" {
		poolDefault = env
	}
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8443", "address of the HTTPS server for the API server's admission calls ("+admission.PodsPath+", "+admission.BindingsPath+", "+admission.NodesPath+"); it also serves /healthz, /readyz and /metrics")
	fs.StringVar(&o.metricsListen, "metrics-listen", ":8080", "address of a plain-HTTP server for /metrics, /healthz and /readyz; empty disables it")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM serving certificate (required); reloaded without a restart when the file changes")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file (required)")
	fs.DurationVar(&o.tlsCheckInterval, "tls-check-interval", 10*time.Second, "how often the certificate files are read again, besides when they change")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses the in-cluster service account")
	fs.StringVar(&o.poolLabel, "pool-label", poolDefault, "node label, and taint key, that puts a node in a tenant's pool (default from "+guard.EnvPoolLabel+" when set)")
	fs.Var(&o.trusted, "trusted-serviceaccounts", "comma-separated service accounts of infrastructure DaemonSets, each <namespace>:<name> or system:serviceaccount:<namespace>:<name>: their DaemonSet pods, created by a --daemonset-controllers user, may target pools; they bind nothing; repeatable")
	fs.Var(&o.daemonSetCreators, "daemonset-controllers", "comma-separated user names that create DaemonSet pods (default "+strings.Join(admission.DefaultDaemonSetControllers, ",")+"); setting it replaces the default, repeating it appends")
	fs.Var(&o.externalSchedulers, "external-schedulers", "comma-separated scheduler names accepted for protected pods in addition to "+guard.SchedulerName+", e.g. volcano,runai-scheduler; repeatable")
	fs.Var(&o.schedulerProfiles, "scheduler-profile", "<scheduler name>=<label selector>: a protected pod may name the external scheduler only when its labels match the selector (the orchestrator profile's workload selector), e.g. volcano=volcano.sh/job-name; repeatable, a pod may match any selector of its scheduler; every --external-schedulers name needs one")
	fs.Var(&o.binders, "binder-serviceaccounts", "comma-separated service accounts allowed to bind protected pods and to bind pods to pool nodes: the controlled scheduler's and each accepted external scheduler's; setting it replaces the default, repeating it appends")
	fs.Var(&o.reportBinders, "report-binders", "comma-separated binders (of --binder-serviceaccounts) whose bindings are only reported: a binding the node-scoped judgement would refuse is allowed and logged; repeatable")
	fs.Var(&o.recordBinders, "record-binders", "comma-separated binders (of --binder-serviceaccounts) whose bindings get, at "+admission.RecordsPath+", the record of the evidence they are judged on ("+guard.AnnotationBoundEvidence+"), as the controlled scheduler writes it: orchestrator integrations' binders; repeatable")
	fs.BoolVar(&o.devices, "devices", false, "judge Dynamic Resource Allocation at "+admission.ClaimsPath+": tenants' ResourceClaims and ResourceClaimTemplates, and every allocation written to resourceclaims/status, per device; needs list and watch on resourceslices and resourceclaims")
	fs.StringVar(&o.gpuSettings, "gpu-settings-namespace", "", "namespace of the GPU controller's settings (GPUSettings "+gpuv1alpha1.SettingsName+"); set, a claim that hands out a DeviceClass a GPUClass sells to VMs is reserved only for the launcher pods of a VMI holding a GPUDevice of it (needs --devices, and get, list and watch on those settings); while they are missing every allocation of a tenant claim is refused")
	fs.StringVar(&o.profile, "profile", string(guard.ProfileProduction), "profile of the in-process evaluator: production (never accepts mock evidence) or lab")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long to let requests in flight finish after SIGTERM")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 5*time.Second, "how long to keep serving after SIGTERM, reporting not ready, while the nodes learn that the pod left the Service; 0 stops at once")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.version {
		return o, nil
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []error
	if o.tlsCertFile == "" || o.tlsKeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file are required: the API server calls webhooks over HTTPS only"))
	}
	if o.poolLabel == "" {
		errs = append(errs, errors.New("--pool-label must not be empty"))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--tls-check-interval", o.tlsCheckInterval}, {"--shutdown-timeout", o.shutdownTimeout}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.d))
		}
	}
	if o.gpuSettings != "" && !o.devices {
		errs = append(errs, errors.New("--gpu-settings-namespace judges allocations, which needs --devices"))
	}
	if o.shutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay must not be negative, got %s", o.shutdownDelay))
	}
	for _, sa := range o.trusted.values {
		if _, err := admission.ParseServiceAccount(sa); err != nil {
			errs = append(errs, fmt.Errorf("--trusted-serviceaccounts: %w", err))
		}
	}
	for _, sa := range o.binders.values {
		if _, err := admission.ParseServiceAccount(sa); err != nil {
			errs = append(errs, fmt.Errorf("--binder-serviceaccounts: %w", err))
		}
	}
	for _, sa := range o.reportBinders.values {
		if _, err := admission.ParseServiceAccount(sa); err != nil {
			errs = append(errs, fmt.Errorf("--report-binders: %w", err))
		}
	}
	for _, sa := range o.recordBinders.values {
		if _, err := admission.ParseServiceAccount(sa); err != nil {
			errs = append(errs, fmt.Errorf("--record-binders: %w", err))
		}
	}
	if !guard.Profile(o.profile).IsValid() {
		errs = append(errs, fmt.Errorf("--profile %q: want %s or %s", o.profile, guard.ProfileProduction, guard.ProfileLab))
	}
	for _, s := range o.externalSchedulers.values {
		if s == guard.SchedulerName {
			errs = append(errs, fmt.Errorf("--external-schedulers: %s is always accepted; list only other schedulers", s))
		} else if len(o.schedulerProfiles.values[s]) == 0 {
			errs = append(errs, fmt.Errorf("--external-schedulers: %s has no --scheduler-profile; a protected pod may name it only when it matches that orchestrator profile's workload selector", s))
		}
	}
	for name, sels := range o.schedulerProfiles.values {
		if name == guard.SchedulerName {
			errs = append(errs, fmt.Errorf("--scheduler-profile: %s is the controlled scheduler; profiles are for external schedulers", name))
		}
		for _, sel := range sels {
			if _, err := labels.Parse(sel); err != nil {
				errs = append(errs, fmt.Errorf("--scheduler-profile %s=%s: %w", name, sel, err))
			}
		}
	}
	return errors.Join(errs...)
}
