package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
	"github.com/xila-guard/xila-guard/components/api/probes"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/compliance"
	"github.com/xila-guard/xila-guard/components/observe/devicetaint"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/metrics"
	"github.com/xila-guard/xila-guard/components/observe/pooltaint"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
	"github.com/xila-guard/xila-guard/components/observe/status"
	"github.com/xila-guard/xila-guard/components/observe/teetaint"
)

// RBAC of the controller's service account, the only writer of
// NodeSecurityState. config/rbac/role.yaml is generated from these markers.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=nodes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io;"",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=guard.xila.us,resources=nodesecuritystates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=guard.xila.us,resources=tenantbindings;placementpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=devicetaintrules,verbs=get;list;watch;create;update;patch;delete

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "xila-guard-observe.guard.xila.us"

// Run parses args and runs the controller until ctx ends. The report goes
// to stdout (or --report-file), JSON logs to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := ParseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, nil))
	ctrl.SetLogger(log)
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	report := stdout
	if o.ReportFile != "" {
		f, err := os.OpenFile(o.ReportFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			return fmt.Errorf("opening the report file: %w", err)
		}
		defer f.Close()
		report = f
	}
	return RunWithConfig(ctx, cfg, o, report, log)
}

// RunWithConfig runs the controller against the cluster of cfg.
func RunWithConfig(ctx context.Context, cfg *rest.Config, o *Options, report io.Writer, log logr.Logger) error {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, v1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	eval, err := newEvaluator(o)
	if err != nil {
		return err
	}
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if o.PolicyReports {
		cacheOpts.ByObject = map[crclient.Object]cache.ByObject{&v1alpha2.PolicyReport{}: postbind.PolicyReportCache()}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	m, err := metrics.New(nil)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := probes.Add(mgr); err != nil {
		return err
	}
	if o.PublishEvidence {
		p := &evidence.Publisher{Client: mgr.GetClient(), Lab: o.MockEvidence, RefreshPeriod: o.RefreshPeriod, OnPublish: m.Published}
		if err := p.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the evidence publisher: %w", err)
		}
	}
	if o.TaintPools {
		if err := (&pooltaint.Manager{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the pool taint manager: %w", err)
		}
	}
	if o.TaintTEE {
		if err := (&teetaint.Manager{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the TEE taint manager: %w", err)
		}
	}
	if o.TaintDevices {
		if err := setUpDeviceTaints(mgr, cfg, eval, o, log); err != nil {
			return err
		}
	}
	if o.ComplianceLabels {
		l := &compliance.Labeller{Client: mgr.GetClient(), Evaluator: eval, Profile: o.Profile, Observer: m}
		if err := l.SetupWithManager(mgr, o.Workers); err != nil {
			return fmt.Errorf("setting up the compliance labeller: %w", err)
		}
	}
	if o.Status {
		c := &status.Controller{Client: mgr.GetClient(), Evaluator: eval, Profile: o.Profile}
		if err := c.SetupWithManager(mgr, o.Workers); err != nil {
			return fmt.Errorf("setting up the status controller: %w", err)
		}
	}
	r := &postbind.Reconciler{Client: mgr.GetClient(), Evaluator: eval, Profile: o.Profile,
		Recorder: mgr.GetEventRecorder("xila-guard-observe"), Sink: postbind.NewSink(report), Observer: m, Resync: o.Resync}
	if o.PolicyReports {
		r.Reports = &postbind.PolicyReports{Client: mgr.GetClient()}
	}
	if err := r.SetupWithManager(ctx, mgr, o.Workers); err != nil {
		return fmt.Errorf("setting up post-binding evaluation: %w", err)
	}
	if r.Reports != nil {
		if err := r.Reports.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("--policy-reports: %w", err)
		}
	}
	log.Info("starting", "coreURL", o.CoreURL, "profile", o.Profile, "mockEvidence", o.MockEvidence,
		"complianceLabels", o.ComplianceLabels, "status", o.Status, "policyReports", o.PolicyReports, "leaderElect", o.LeaderElect)
	return mgr.Start(ctx)
}

// newEvaluator returns the service client, or the library in-process.
func newEvaluator(o *Options) (postbind.Evaluator, error) {
	if o.CoreURL == InProcess {
		e, err := evaluate.New(evaluate.Options{Profile: o.Profile})
		if err != nil {
			return nil, fmt.Errorf("creating the in-process evaluator: %w", err)
		}
		return postbind.Local{Evaluator: e}, nil
	}
	c, err := client.New(o.CoreURL, client.WithTimeout(o.EvalTimeout))
	if err != nil {
		return nil, fmt.Errorf("creating the evaluator client: %w", err)
	}
	return postbind.Remote{Client: c}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// setUpDeviceTaints runs the device tainter where the cluster serves
// DeviceTaintRules; elsewhere devices whose evidence fails are refused at
// allocation only, which it logs.
func setUpDeviceTaints(mgr ctrl.Manager, cfg *rest.Config, eval postbind.Evaluator, o *Options, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a discovery client: %w", err)
	}
	served, err := devicetaint.Served(dc)
	if err != nil {
		return fmt.Errorf("asking whether DeviceTaintRules are served: %w", err)
	}
	if !served {
		log.Info("the cluster serves no DeviceTaintRules (resource.k8s.io/v1alpha3, feature gate DRADeviceTaints): devices whose evidence fails are refused at allocation, not tainted")
		return nil
	}
	t := &devicetaint.Tainter{Client: mgr.GetClient(), Evaluator: eval, Profile: o.Profile}
	if err := t.SetupWithManager(mgr, o.Workers); err != nil {
		return fmt.Errorf("setting up the device tainter: %w", err)
	}
	return nil
}
