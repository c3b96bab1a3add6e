// Package app assembles the GPU controller: flags, logging, the manager
// with leader election, health and metrics endpoints, the check that the
// cluster serves KubeVirt's VMIs, and the controllers.
package app

import (
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultNamespace is the platform namespace when neither --namespace nor
// POD_NAMESPACE says otherwise.
const DefaultNamespace = "xila-guard"

// Options are the controller's settings, one flag each.
type Options struct {
	Kubeconfig       string
	Namespace        string
	Workers          int
	MetricsAddr      string
	ProbeAddr        string
	LeaderElect      bool
	LeaderElectionNS string
	// KubeVirtController is the user name of KubeVirt's controller.
	KubeVirtController string
}

// ParseFlags reads the options from args; usage goes to out. The platform
// namespace defaults to $POD_NAMESPACE, else DefaultNamespace; the leader
// Lease to the platform namespace.
func ParseFlags(args []string, out io.Writer) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("xila-guard-gpudevices", flag.ContinueOnError)
	fs.SetOutput(out)
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = DefaultNamespace
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses in-cluster config or $KUBECONFIG")
	fs.StringVar(&o.Namespace, "namespace", ns, "platform namespace of the settings (GPUSettings) and the usage records; defaults to $POD_NAMESPACE")
	fs.IntVar(&o.Workers, "workers", 4, "concurrent device reconciles")
	fs.StringVar(&o.KubeVirtController, "kubevirt-controller", "system:serviceaccount:kubevirt:kubevirt-controller", "user name of KubeVirt's controller: the settings name it as the only creator of pods that request a GPU for VMs")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":9090", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader, so that two replicas can run")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "namespace of the leader Lease; empty for the platform namespace")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.LeaderElectionNS == "" {
		o.LeaderElectionNS = o.Namespace
	}
	switch {
	case len(validation.IsDNS1123Label(o.Namespace)) > 0:
		return nil, fmt.Errorf("--namespace %q is not a namespace name", o.Namespace)
	case o.Workers < 1:
		return nil, fmt.Errorf("--workers must be at least 1")
	}
	return o, nil
}
