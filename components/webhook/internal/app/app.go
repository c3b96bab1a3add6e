// Package app is the xila-guard-webhook command: flags, logging, the
// informers, the HTTPS server and its lifecycle. main only calls Main.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	cwmetrics "sigs.k8s.io/controller-runtime/pkg/certwatcher/metrics"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/webhook/internal/cluster"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// Main runs the command with the process's arguments until SIGTERM or
// SIGINT, and returns the exit code. It is the only place that knows about
// the process.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return 1
	}
}

// Run parses args and serves until ctx is done, then shuts down gracefully.
// Logs go to stderr as JSON; --version prints to stdout.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case ArmCommand:
			return runArm(ctx, args[1:], stderr)
		case CheckCommand:
			return runCheck(ctx, args[1:], stdout, stderr)
		}
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		_, err := fmt.Fprintf(stdout, "%s %s\n", Name, version.Get())
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	// client-go reports through klog, e.g. an informer's list refused by
	// RBAC; send that to the same JSON log.
	klog.SetSlogLogger(logger)
	return run(ctx, o, logger)
}

func run(ctx context.Context, o *options, logger *slog.Logger) error {
	restCfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = Name + "/" + version.Get()
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building a Kubernetes client: %w", err)
	}
	cl, err := cluster.New(restCfg, kube)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := admission.NewMetrics(reg)
	ev, err := evaluate.New(evaluate.Options{Profile: guard.Profile(o.profile)})
	if err != nil {
		return err
	}
	synced := cl.Synced
	var devs *cluster.Devices
	if o.devices {
		if devs, err = cluster.NewDevices(kube); err != nil {
			return err
		}
		synced = func() bool { return cl.Synced() && devs.Synced() }
	}
	var gpus *cluster.GPUSettings
	if o.gpuSettings != "" {
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			return fmt.Errorf("building a dynamic client: %w", err)
		}
		gpus = cluster.NewGPUSettings(dyn, o.gpuSettings)
		before := synced
		synced = func() bool { return before() && gpus.Synced() }
	}
	v, err := admission.New(admission.Config{
		Profile:                guard.Profile(o.profile),
		ReportBinders:          o.reportBinders.values,
		RecordBinders:          o.recordBinders.values,
		PoolLabel:              o.poolLabel,
		SchedulerProfiles:      o.schedulerProfiles.values,
		TrustedServiceAccounts: o.trusted.values,
		DaemonSetControllers:   o.daemonSetCreators.values,
		Binders:                o.binders.values,
		Cluster:                cl,
		Devices:                devicesOf(devs),
		GPUSettings:            gpuSettingsOf(gpus),
		Evaluator:              ev,
		Metrics:                metrics,
		Logger:                 logger,
	})
	if err != nil {
		return err
	}
	// The certificate watcher logs through controller-runtime's logger.
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
	watcher, err := certwatcher.New(o.tlsCertFile, o.tlsKeyFile)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	watcher = watcher.WithWatchInterval(o.tlsCheckInterval)
	syncedGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "xila_guard_webhook_caches_synced",
		Help: "1 once every informer cache has synced, else 0.",
	}, func() float64 {
		if synced() {
			return 1
		}
		return 0
	})
	reg.MustRegister(syncedGauge, cwmetrics.ReadCertificateTotal, cwmetrics.ReadCertificateErrors)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl.Start(ctx)
	if devs != nil {
		devs.Start(ctx)
	}
	if gpus != nil {
		gpus.Start(ctx)
	}
	go func() {
		// Reads the pair again when its files change, and every
		// --tls-check-interval in case a change went unnoticed.
		if err := watcher.Start(ctx); err != nil {
			logger.Error("watching the serving certificate failed; stopping", "err", err)
			cancel()
		}
	}()

	p := &probes{synced: synced}
	mux := http.NewServeMux()
	mux.Handle(admission.PodsPath, v.PodsHandler())
	mux.Handle(admission.BindingsPath, v.BindingsHandler())
	mux.Handle(admission.NodesPath, v.NodesHandler())
	mux.Handle(admission.MigrationsPath, v.MigrationsHandler())
	mux.Handle(admission.TEEPath, v.TEEHandler())
	mux.Handle(admission.RecordsPath, v.RecordsHandler())
	mux.Handle(admission.ClaimsPath, v.ClaimsHandler())
	p.register(mux, reg)

	tlsLn, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}
	servers := []*http.Server{newServer(mux, tlsCfg, logger)}
	listeners := []net.Listener{tls.NewListener(tlsLn, tlsCfg)}
	if o.metricsListen != "" {
		mln, err := net.Listen("tcp", o.metricsListen)
		if err != nil {
			tlsLn.Close()
			return fmt.Errorf("listening on %s: %w", o.metricsListen, err)
		}
		mmux := http.NewServeMux()
		p.register(mmux, reg)
		servers = append(servers, newServer(mmux, nil, logger))
		listeners = append(listeners, mln)
	}
	served := make(chan error, len(servers))
	for i, s := range servers {
		go func() { served <- s.Serve(listeners[i]) }()
	}
	logger.Info("serving", "addr", tlsLn.Addr().String(), "metricsAddr", o.metricsListen, "version", version.Get(),
		"poolLabel", o.poolLabel, "profile", o.profile, "schedulerProfiles", o.schedulerProfiles.values,
		"trustedServiceAccounts", o.trusted.values, "binderServiceAccounts", o.binders.values)
	go func() {
		if cl.WaitForSync(ctx) && (devs == nil || devs.WaitForSync(ctx)) {
			logger.Info("caches synced; ready")
		}
	}()

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	// Report not ready, and keep serving for the shutdown delay: the pod
	// leaves the Service's endpoints when it begins to terminate, but every
	// node's kube-proxy (the API server's among them) learns it a moment
	// later, and until then new admission calls still arrive here. A
	// replica that stopped listening at once would fail them, and with
	// failurePolicy Fail refuse the request, at every rolling update.
	p.stopping.Store(true)
	if o.shutdownDelay > 0 {
		logger.Info("draining", "delay", o.shutdownDelay.String())
		select {
		case err := <-served:
			return fmt.Errorf("serving: %w", err)
		case <-time.After(o.shutdownDelay):
		}
	}
	logger.Info("shutting down", "timeout", o.shutdownTimeout.String())
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer scancel()
	var errs []error
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down: %w", err))
		}
	}
	logger.Info("stopped")
	return errors.Join(errs...)
}

// devicesOf keeps a nil *cluster.Devices a nil admission.Devices.
func devicesOf(d *cluster.Devices) admission.Devices {
	if d == nil {
		return nil
	}
	return d
}

// gpuSettingsOf keeps a nil *cluster.GPUSettings a nil
// admission.GPUSettings.
func gpuSettingsOf(g *cluster.GPUSettings) admission.GPUSettings {
	if g == nil {
		return nil
	}
	return g
}

func newServer(h http.Handler, tlsCfg *tls.Config, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      35 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
