package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/probes"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/attest/teeresources"
)

// TEEResourcesOptions are the flags of the TEE resource agent.
type TEEResourcesOptions struct {
	kubeconfig   string
	nodeName     string
	accepted     []v1alpha1.EvidenceSource
	enclaveLimit int
	lab          bool
	devDir       string
	pluginDir    string
	resync       time.Duration
	metricsAddr  string
	probeAddr    string
	logLevel     slog.Level
}

// ParseTEEResourcesFlags reads the TEE resource agent's flags from args;
// usage goes to stderr.
func ParseTEEResourcesFlags(args []string, stderr io.Writer) (*TEEResourcesOptions, error) {
	o := &TEEResourcesOptions{accepted: teeresources.DefaultAcceptedSources}
	fs := flag.NewFlagSet(Name+" tee-resources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses in-cluster config or $KUBECONFIG")
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node this agent runs on and whose NodeSecurityState it reads (default $NODE_NAME)")
	fs.Func("accepted-sources", "comma-separated evidence sources whose EPC size is advertised: attested (the default), nfd, mock", func(v string) error {
		var err error
		o.accepted, err = parseSources(v)
		return err
	})
	fs.IntVar(&o.enclaveLimit, "enclave-limit", teeresources.DefaultEnclaveLimit, "how many sgx.intel.com/enclave devices the node offers: containers that may use the enclave device at once")
	fs.BoolVar(&o.lab, "lab", false, "lab: allocations map /dev/null to the container's "+teeresources.EnclaveDevice+", for nodes without SGX")
	fs.StringVar(&o.devDir, "dev-dir", "/dev", "where the host's /dev is mounted, to see whether it has "+teeresources.EnclaveDevice)
	fs.StringVar(&o.pluginDir, "device-plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory (kubelet.sock and the plugins' sockets)")
	fs.DurationVar(&o.resync, "resync", teeresources.DefaultResync, "how often the node and its evidence are read again besides when the evidence changes")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or $NODE_NAME)"))
	}
	if o.enclaveLimit < 1 || o.enclaveLimit > teeresources.MaxEnclaveLimit {
		errs = append(errs, fmt.Errorf("--enclave-limit %d: want 1 to %d", o.enclaveLimit, teeresources.MaxEnclaveLimit))
	}
	if o.resync <= 0 {
		errs = append(errs, fmt.Errorf("--resync must be positive, got %s", o.resync))
	}
	if o.pluginDir == "" || o.devDir == "" {
		errs = append(errs, errors.New("--device-plugin-dir and --dev-dir may not be empty"))
	}
	return o, errors.Join(errs...)
}

// parseSources reads a comma-separated list of evidence sources.
func parseSources(v string) ([]v1alpha1.EvidenceSource, error) {
	known := []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD, v1alpha1.SourceMock}
	var out []v1alpha1.EvidenceSource
	for _, s := range strings.Split(v, ",") {
		src := v1alpha1.EvidenceSource(strings.TrimSpace(s))
		switch {
		case !slices.Contains(known, src):
			return nil, fmt.Errorf("source %q: want %v", src, known)
		case slices.Contains(out, src):
			return nil, fmt.Errorf("source %s is listed twice", src)
		}
		out = append(out, src)
	}
	return out, nil
}

func runTEEResources(ctx context.Context, o *TEEResourcesOptions, stderr io.Writer) error {
	logger := newLogger(stderr, o.logLevel)
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	return RunTEEResourcesWithConfig(ctx, cfg, o, logger)
}

// RunTEEResourcesWithConfig runs the TEE resource agent of o.nodeName
// against the cluster of cfg until ctx ends: the enclave device plugin,
// registered with the kubelet of the node, and the EPC capacity of the
// node's status, both following the node's NodeSecurityState.
func RunTEEResourcesWithConfig(ctx context.Context, cfg *rest.Config, o *TEEResourcesOptions, logger *slog.Logger) error {
	log := logr.FromSlogHandler(logger.Handler())
	ctrl.SetLogger(log)
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			// The node's own state, watched by name.
			ByObject: map[client.Object]cache.ByObject{&v1alpha1.NodeSecurityState{}: {
				Field: fields.OneTermEqualSelector("metadata.name", o.nodeName),
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	m, err := teeresources.NewMetrics(metrics.Registry)
	if err != nil {
		return err
	}
	agent := &teeresources.Agent{
		Node:     o.nodeName,
		Client:   mgr.GetClient(),
		Live:     mgr.GetAPIReader(),
		States:   mgr.GetClient(),
		Accepted: o.accepted,
		Plugin: &teeresources.Plugin{Count: o.enclaveLimit, Dir: o.pluginDir, Lab: o.lab, DevDir: o.devDir,
			Log: logger.With("component", "device-plugin")},
		Resync:  o.resync,
		Log:     logger,
		Metrics: m,
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.NodeSecurityState{})
	if err != nil {
		return fmt.Errorf("watching the NodeSecurityState of %s: %w", o.nodeName, err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { agent.Kick(false) },
		UpdateFunc: func(any, any) { agent.Kick(false) },
		DeleteFunc: func(any) { agent.Kick(false) },
	}); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(agent.Run)); err != nil {
		return err
	}
	if err := probes.Add(mgr); err != nil {
		return err
	}
	logger.Info("starting", "version", version.Get(), "node", o.nodeName, "acceptedSources", o.accepted,
		"enclaveLimit", o.enclaveLimit, "lab", o.lab, "devicePluginDir", o.pluginDir)
	return mgr.Start(ctx)
}
