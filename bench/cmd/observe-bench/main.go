// Command observe-bench measures the observe controller against a real
// kube-apiserver (envtest, no kubelets): how long after an evidence change
// on one node its pods' drift records are written, and the controller's
// steady-state CPU and memory. KUBEBUILDER_ASSETS must name the envtest
// binaries; the CRDs are read from --crds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

func main() {
	cli.Main("observe-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}

type config struct {
	nodes, podsPerNode, flips int
	steady                    time.Duration
	crds                      string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("observe-bench", flag.ContinueOnError)
	fs.IntVar(&c.nodes, "nodes", 500, "pool nodes")
	fs.IntVar(&c.podsPerNode, "pods-per-node", 10, "bound protected pods per node")
	fs.IntVar(&c.flips, "flips", 100, "evidence changes to time")
	fs.DurationVar(&c.steady, "steady", time.Minute, "steady-state window for CPU and memory")
	fs.StringVar(&c.crds, "crds", filepath.Join("components", "api", "config", "crd"), "CRD directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set")
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	env := &envtest.Environment{CRDDirectoryPaths: []string{c.crds}, ErrorIfCRDPathMissing: true, Scheme: scheme}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 2000, 4000
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	start := time.Now()
	if err := populate(ctx, k8s, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "created %d nodes and %d pods in %s\n", c.nodes, c.nodes*c.podsPerNode, time.Since(start).Round(time.Millisecond))

	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		return err
	}
	sink := &driftSink{arrivals: make(chan arrival, 100000)}
	counter := &counter{}
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()}})
	if err != nil {
		return err
	}
	if err := (&evidence.Publisher{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	r := &postbind.Reconciler{Client: mgr.GetClient(), Evaluator: postbind.Local{Evaluator: eval},
		Recorder: mgr.GetEventRecorder("observe-bench"), Sink: postbind.NewSink(sink), Observer: counter}
	if err := r.SetupWithManager(ctx, mgr, 8); err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	start = time.Now()
	total := int64(c.nodes * c.podsPerNode)
	for counter.n.Load() < total {
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("only %d of %d pods evaluated after 5m", counter.n.Load(), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(out, "first evaluation of every pod after %s\n", time.Since(start).Round(time.Millisecond))

	usage, err := steadyState(c.steady)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, usage)
	lat, err := flips(ctx, k8s, sink, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "evidence change to last drift record of the node's %d pods, %d changes: p50 %s p90 %s p99 %s max %s\n",
		c.podsPerNode, len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1])
	return nil
}

// counter counts evaluations.
type counter struct{ n atomic.Int64 }

func (c *counter) Evaluated(wire.NodeResult, time.Duration, bool) { c.n.Add(1) }
func (c *counter) Drifted(guard.Decision, guard.Decision)         {}

type arrival struct {
	node string
	at   time.Time
}

// driftSink timestamps each drift line as it is written.
type driftSink struct {
	mu       sync.Mutex
	arrivals chan arrival
}

func (d *driftSink) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r postbind.Record
	if err := json.Unmarshal(p, &r); err == nil && r.Kind == postbind.KindDrift {
		d.arrivals <- arrival{r.Node, time.Now()}
	}
	return len(p), nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func nodeName(i int) string { return fmt.Sprintf("bench-%04d", i) }

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
