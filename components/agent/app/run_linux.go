//go:build linux

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/xila-guard/xila-guard/components/agent/controller"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
)

// Run parses args and runs the agent until ctx ends. Logs go to stderr
// as JSON.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := ParseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr, o.LogLevel, o.NodeName)
	klog.SetSlogLogger(log)
	switch o.Mode {
	case ModeCleanup:
		return removeDataplane(o, log)
	case ModeAudit:
		if err := removeDataplane(o, log); err != nil {
			return err
		}
	}
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var dp *dataplane.Dataplane
	var enf *enforcer.Enforcer
	if o.Mode == ModeEnforce {
		if dp, err = dataplane.Open(dataplane.Config{PinPath: o.PinPath, Attach: o.Attach}); err != nil {
			return fmt.Errorf("opening the dataplane: %w", err)
		}
		enf = enforcer.New(dp)
		reg.MustRegister(newStatsCollector(dp))
	} else {
		enf = enforcer.New(auditDataplane{})
	}
	log.Info("starting", "mode", o.Mode, "pinPath", o.PinPath, "serviceCIDRs", fmt.Sprint(o.ServiceCIDRs), "daemonSet", o.DaemonSet)

	var owner *ownerWatch
	if o.DaemonSet != "" {
		if owner, err = watchOwner(ctx, cs, o.DaemonSet); err != nil {
			return fmt.Errorf("watching the DaemonSet %s: %w", o.DaemonSet, err)
		}
	}
	runErr := run(ctx, o, cs, enf, reg, log)
	if dp == nil {
		return runErr
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gone, why := uninstalled(stopCtx, cs, o.DaemonSet, owner)
	if gone {
		log.Info("uninstalled: removing the dataplane; pods on this node are no longer enforced", "reason", why)
		return errors.Join(runErr, dp.Uninstall())
	}
	log.Info("stopping; the pinned dataplane keeps enforcing the last policy", "reason", why)
	return errors.Join(runErr, dp.Close())
}

func run(ctx context.Context, o *Options, cs kubernetes.Interface, enf *enforcer.Enforcer, reg *prometheus.Registry, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripManagedFields))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "xila-guard-agent", Host: o.NodeName})

	metrics := controller.NewMetrics(reg)
	c, err := controller.New(controller.Config{NodeName: o.NodeName, ServiceCIDRs: o.ServiceCIDRs, Resync: o.Resync},
		controller.Deps{Informers: factory, Enforcer: enf, ReadHost: hostnet.Read, Recorder: recorder, Metrics: metrics, Log: log})
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	if err := hostnet.Subscribe(changed, ctx.Done()); err != nil {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				c.Notify()
			}
		}
	}()

	srv := &http.Server{Addr: o.Listen, Handler: newMux(reg, c), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Listen, err)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics and probe server failed", "error", err.Error())
			cancel()
		}
	}()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	return c.Run(ctx)
}

// newMux serves /metrics, /healthz (the loop turns) and /readyz (the
// first reconcile completed).
func newMux(reg *prometheus.Registry, c interface {
	Healthy() error
	Ready() error
}) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		}
	}
	mux.Handle("/healthz", probe(c.Healthy))
	mux.Handle("/readyz", probe(c.Ready))
	return mux
}

// removeDataplane detaches and unpins what an enforcing agent left.
func removeDataplane(o *Options, log *slog.Logger) error {
	if _, err := os.Stat(o.PinPath); errors.Is(err, os.ErrNotExist) {
		log.Info("no pinned dataplane to remove", "pinPath", o.PinPath)
		return nil
	}
	dp, err := dataplane.Open(dataplane.Config{PinPath: o.PinPath, Attach: o.Attach})
	if err != nil {
		return fmt.Errorf("opening the pinned dataplane to remove it: %w", err)
	}
	if err := dp.Uninstall(); err != nil {
		return fmt.Errorf("removing the dataplane: %w", err)
	}
	log.Info("removed the pinned dataplane: nothing is enforced on this node", "pinPath", o.PinPath)
	return nil
}

// stripManagedFields keeps the informers' memory to what the agent reads.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		return rest.InClusterConfig()
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}
