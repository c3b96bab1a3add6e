package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/probes"
	"github.com/xila-guard/xila-guard/components/gpudevices/controller"
	"github.com/xila-guard/xila-guard/components/gpudevices/metrics"
)

// RBAC of the controller's service account, the only writer of device and
// class status, of the settings and of the usage records.
// config/rbac/role.yaml is generated from these markers; the chart narrows
// ConfigMaps and GPUSettings to the platform namespace.
//
// +kubebuilder:rbac:groups=gpu.guard.xila.us,resources=gpuclasses;gpudevices,verbs=get;list;watch;update;patch;create;delete
// +kubebuilder:rbac:groups=gpu.guard.xila.us,resources=gpuclasses/status;gpudevices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gpu.guard.xila.us,resources=gpuclasses/finalizers;gpudevices/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gpu.guard.xila.us,resources=gpusettings,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io;"",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "xila-guard-gpudevices.guard.xila.us"

// Run parses args and runs the controller until ctx ends; JSON logs go to
// stderr.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
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
	return RunWithConfig(ctx, cfg, o, log)
}

// RunWithConfig runs the controller against the cluster of cfg. It returns
// an error wrapping controller.ErrNoVMIs, without starting anything, when
// the cluster does not serve KubeVirt's VirtualMachineInstances.
func RunWithConfig(ctx context.Context, cfg *rest.Config, o *Options, log logr.Logger) error {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gpuv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
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
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			// The usage records are the only ConfigMaps the controller
			// reads, and its settings the only GPUSettings.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}:        {Namespaces: map[string]cache.Config{o.Namespace: {}}},
				&gpuv1alpha1.GPUSettings{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
			},
		},
		// VMIs are read as unstructured objects, from the cache too.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := controller.RequireVMIs(mgr.GetRESTMapper()); err != nil {
		log.Error(err, "cannot start the GPU controller")
		return err
	}
	m, err := metrics.New(nil, controller.ControllerClasses, controller.ControllerSettings, controller.ControllerDevices, controller.ControllerTemplates)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := probes.Add(mgr); err != nil {
		return err
	}
	if err := controller.Setup(ctx, mgr, controller.Options{Namespace: o.Namespace, Workers: o.Workers, KubeVirtController: o.KubeVirtController,
		Recorder: mgr.GetEventRecorder("xila-guard-gpudevices"), Observer: m}); err != nil {
		return fmt.Errorf("setting up the GPU controllers: %w", err)
	}
	log.Info("starting", "namespace", o.Namespace, "workers", o.Workers, "leaderElect", o.LeaderElect)
	return mgr.Start(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}
