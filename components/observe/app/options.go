// Package app assembles the observe controller: flags, logging, the
// manager with leader election, health and metrics endpoints, and the
// publisher, taint and post-binding controllers.
package app

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// InProcess as --core-url runs the evaluator library inside the controller
// instead of calling xila-guard-core.
const InProcess = "in-process"

// Options are the controller's settings, one flag each.
type Options struct {
	Kubeconfig       string
	CoreURL          string
	EvalTimeout      time.Duration
	Profile          guard.Profile
	MockEvidence     bool
	PublishEvidence  bool
	TaintPools       bool
	TaintTEE         bool
	TaintDevices     bool
	ComplianceLabels bool
	RefreshPeriod    time.Duration
	Resync           time.Duration
	Workers          int
	ReportFile       string
	PolicyReports    bool
	Status           bool
	MetricsAddr      string
	ProbeAddr        string
	LeaderElect      bool
	LeaderElectionNS string
}

// ParseFlags reads the options from args; usage goes to out.
func ParseFlags(args []string, out io.Writer) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("xila-guard-observe", flag.ContinueOnError)
	fs.SetOutput(out)
	var profile string
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses in-cluster config or $KUBECONFIG")
	fs.StringVar(&o.CoreURL, "core-url", InProcess, InProcess+" runs the evaluator library in this process; or the base URL of a xila-guard-core")
	fs.DurationVar(&o.EvalTimeout, "eval-timeout", guard.DefaultEvalTimeout, "bound on one evaluator call")
	fs.StringVar(&profile, "profile", string(guard.ProfileProduction), "evaluator profile to ask for: production or lab")
	fs.BoolVar(&o.MockEvidence, "mock-evidence", false, "lab only: publish guard.xila.us/mock-* node labels as mock evidence")
	fs.BoolVar(&o.PublishEvidence, "publish-evidence", true, "publish NodeSecurityStates from node feature labels")
	fs.BoolVar(&o.TaintPools, "taint-pools", true, "keep the NoSchedule pool taint of pool nodes in step with their label")
	fs.BoolVar(&o.TaintTEE, "taint-tee", false, "keep a "+guard.TaintTEE+"=<type>:NoSchedule taint on every node whose attested evidence shows a TEE")
	fs.BoolVar(&o.TaintDevices, "taint-devices", false, "keep a DeviceTaintRule ("+guard.DeviceTaintKey+") on every DRA device of a pool node whose evidence the pool's policies do not allow; where the cluster serves no DeviceTaintRules (resource.k8s.io/v1alpha3), say so and taint nothing")
	fs.BoolVar(&o.ComplianceLabels, "compliance-labels", true, "keep a "+guard.ComplianceLabelPrefix+"<policy>=true label on each node the policy allows its tenants' pods on")
	fs.DurationVar(&o.RefreshPeriod, "refresh-period", evidence.DefaultRefreshPeriod, "how often unchanged evidence gets a new observedAt")
	fs.DurationVar(&o.Resync, "resync", postbind.DefaultResync, "how often every protected pod is re-evaluated")
	fs.IntVar(&o.Workers, "workers", 8, "concurrent post-binding evaluations")
	fs.StringVar(&o.ReportFile, "report-file", "", "file the JSON report lines are appended to; empty for stdout")
	fs.BoolVar(&o.Status, "status", true, "keep the status of PlacementPolicies, TenantBindings and NodeSecurityStates")
	fs.BoolVar(&o.PolicyReports, "policy-reports", false, "keep a wgpolicyk8s.io/v1alpha2 PolicyReport "+postbind.PolicyReportName+" in every namespace with protected pods; the start fails when the cluster serves no PolicyReport")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":9090", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader, so that two replicas can run")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "namespace of the leader Lease; empty for the pod's own")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Profile = guard.Profile(profile)
	switch {
	case !o.Profile.IsValid():
		return nil, fmt.Errorf("--profile %q: want %s or %s", profile, guard.ProfileProduction, guard.ProfileLab)
	case o.MockEvidence && o.Profile != guard.ProfileLab:
		return nil, fmt.Errorf("--mock-evidence needs --profile %s", guard.ProfileLab)
	case o.EvalTimeout <= 0 || o.RefreshPeriod <= 0 || o.Resync <= 0:
		return nil, fmt.Errorf("--eval-timeout, --refresh-period and --resync must be positive")
	case o.Workers < 1:
		return nil, fmt.Errorf("--workers must be at least 1")
	}
	return o, nil
}
