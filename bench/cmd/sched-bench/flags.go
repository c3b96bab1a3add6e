package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// options are the command-line settings of sched-bench.
type options struct {
	nodes, poolNodes, tenants, pods int
	protected                       float64
	pacedPods                       int
	pacedRate                       float64
	variants                        []string
	runs                            int
	assets, crds                    string
	qps                             int
	profileDir                      string
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("sched-bench", flag.ContinueOnError)
	fs.IntVar(&o.nodes, "nodes", 1000, "Node objects in all")
	fs.IntVar(&o.poolNodes, "pool-nodes", 500, "how many of them are in tenant pools")
	fs.IntVar(&o.tenants, "tenants", 5, "tenants, each with an equal share of the pool nodes")
	fs.IntVar(&o.pods, "pods", 2000, "pods per run")
	fs.Float64Var(&o.protected, "protected", 0.5, "share of the pods that belong to a tenant")
	fs.IntVar(&o.pacedPods, "paced-pods", 300, "pods created at a steady rate after the others, for the latency from creation to bind")
	fs.Float64Var(&o.pacedRate, "paced-rate", 25, "pods per second for --paced-pods")
	variants := fs.String("variants", "plugin,every-cycle,stock", "variants to run, in order")
	fs.IntVar(&o.runs, "runs", 1, "runs of each variant; the table shows the median run by throughput")
	fs.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, or _output/envtest)")
	fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
	fs.StringVar(&o.profileDir, "cpu-profile-dir", "", "write a CPU profile of this process (the scheduler) during each run's burst to <dir>/<variant>-<round>.pprof")
	fs.IntVar(&o.qps, "qps", 5000, "the scheduler's API client QPS and burst, alike for every variant")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.assets == "" {
		o.assets = "_output/envtest"
	}
	o.variants = strings.Split(*variants, ",")
	var errs []error
	for _, v := range o.variants {
		if _, ok := variantConfigs[v]; !ok {
			errs = append(errs, fmt.Errorf("unknown variant %q", v))
		}
	}
	if o.poolNodes > o.nodes || o.tenants < 1 || o.poolNodes < o.tenants {
		errs = append(errs, errors.New("want 1 <= tenants <= pool-nodes <= nodes"))
	}
	if o.protected < 0 || o.protected > 1 || o.pods < 1 || o.runs < 1 {
		errs = append(errs, errors.New("want pods and runs >= 1 and 0 <= protected <= 1"))
	}
	return o, errors.Join(errs...)
}
