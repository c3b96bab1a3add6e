package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// options are the command-line settings of sched-bench.
type options struct {
	nodes, poolNodes, generalGPUNodes, tenants int
	burstPods                                  int
	steadyRate                                 int
	steadyFor                                  time.Duration
	variants                                   []string
	qps                                        []int // 0: unthrottled
	runs                                       int
	assets, crds                               string
	profileDir                                 string
	featureGates                               string
}

// chartQPS is the scheduler's client QPS in the chart's values
// (enforcement.scheduler.clientConnection); its burst is twice that.
const chartQPS = 100

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("sched-bench", flag.ContinueOnError)
	fs.IntVar(&o.nodes, "nodes", 1000, "Node objects in all")
	fs.IntVar(&o.poolNodes, "pool-nodes", 500, "how many of them are in tenant pools (each with 8 GPUs)")
	fs.IntVar(&o.generalGPUNodes, "general-gpu-nodes", 200, "how many of the others offer 8 GPUs")
	fs.IntVar(&o.tenants, "tenants", 5, "tenants, each with an equal share of the pool nodes")
	fs.IntVar(&o.burstPods, "burst-pods", 1000, "pods created at once before the scheduler starts, for throughput")
	fs.IntVar(&o.steadyRate, "steady-rate", 50, "pods per second created open-loop after the burst, for latency")
	fs.DurationVar(&o.steadyFor, "steady-for", 60*time.Second, "how long pods arrive at --steady-rate")
	variants := fs.String("variants", "plugin,stock,affinity", "variants to run, in order, each round (plugin, every-cycle, stock, affinity)")
	qps := fs.String("qps", fmt.Sprintf("%d,0", chartQPS), "the schedulers' client QPS settings to run, burst twice each; 0 is unthrottled")
	fs.IntVar(&o.runs, "runs", 5, "rounds; every round runs every variant at every QPS setting")
	fs.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, or _output/envtest)")
	fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
	fs.StringVar(&o.profileDir, "cpu-profile-dir", "", "write a CPU profile of this process (the scheduler) during each run's burst to <dir>/<variant>-<qps>-<round>.pprof")
	fs.StringVar(&o.featureGates, "feature-gates", "NominatedNodeNameForExpectation=false", "kube-scheduler feature gates for every variant (the chart's enforcement.scheduler.featureGates)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.assets == "" {
		o.assets = "_output/envtest"
	}
	var errs []error
	o.variants = strings.Split(*variants, ",")
	for _, v := range o.variants {
		if _, ok := variantDescriptions[v]; !ok {
			errs = append(errs, fmt.Errorf("unknown variant %q", v))
		}
	}
	for _, q := range strings.Split(*qps, ",") {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("--qps: %q is not a QPS (0 for unthrottled)", q))
		}
		o.qps = append(o.qps, n)
	}
	if o.poolNodes+o.generalGPUNodes > o.nodes || o.tenants < 1 || o.poolNodes < o.tenants {
		errs = append(errs, errors.New("want 1 <= tenants <= pool-nodes and pool-nodes + general-gpu-nodes <= nodes"))
	}
	if o.burstPods < 1 || o.runs < 1 || o.steadyRate <= 0 || o.steadyFor <= 0 {
		errs = append(errs, errors.New("want burst-pods, runs, steady-rate and steady-for above 0"))
	}
	return o, errors.Join(errs...)
}

// qpsName names a QPS setting in the report.
func qpsName(q int) string {
	if q == 0 {
		return "unthrottled"
	}
	return fmt.Sprintf("QPS %d, burst %d", q, 2*q)
}
