package plugin

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
)

// Exit codes: a check that ran and found something wrong is ExitFailed,
// input or a cluster that could not be read is ExitError.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitError  = 2
)

// ExitCodeError carries the exit code of a command that ran.
type ExitCodeError struct {
	Code int
}

func (e *ExitCodeError) Error() string { return fmt.Sprintf("exit code %d", e.Code) }

// ExitCode maps a command's error to the process's exit code.
func ExitCode(err error) int {
	var ec *ExitCodeError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ec):
		return ec.Code
	}
	return ExitError
}

// DefaultNamespace is where the chart installs the platform.
const DefaultNamespace = "xila-guard-system"

type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	profile string
}

// NewCommand returns `kubectl xila-guard`.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use: "kubectl-xila_guard",
		// kubectl runs the binary kubectl-xila_guard for `kubectl xila-guard`.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl xila-guard"},
		Short:       "Explain Xila Guard's decisions, test policies offline and check an installation",
		Long: `kubectl xila-guard explains why a pod is Pending or where it may run
(explain), evaluates a policy against evidence files without a cluster
(test), and shows the health of an installation (status).`,
		Version:       version.Get(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.PersistentFlags().StringVar(&o.profile, "profile", string(guard.ProfileProduction),
		"evaluator profile: production, or lab (accepts mock evidence); use the one the cluster's components run")
	root.AddCommand(o.explainCommand(), o.testCommand(), o.statusCommand())
	return root
}

func (o *options) clients() (client.Client, kubernetes.Interface, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, v1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return c, cs, err
}

func (o *options) explainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain pod [NAMESPACE/]NAME",
		Short: "Why a pod is Pending or refused, node by node; for a running pod, whether it would be admitted now",
		Example: `  kubectl xila-guard explain pod acme-ml/train-0
  kubectl xila-guard explain pod -n acme-ml train-0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "pod" && args[0] != "pods" && args[0] != "po" {
				return fmt.Errorf("explain knows pods only, not %q", args[0])
			}
			ns, name, ok := strings.Cut(args[1], "/")
			if !ok {
				name = ns
				ns, _, _ = o.flags.ToRawKubeConfigLoader().Namespace()
			}
			c, _, err := o.clients()
			if err != nil {
				return err
			}
			e, err := Explain(cmd.Context(), c, guard.Profile(o.profile), nil, ns, name)
			if err != nil {
				return err
			}
			PrintExplanation(o.streams.Out, e)
			if e.Protected && !e.Allowed() {
				return &ExitCodeError{ExitFailed}
			}
			return nil
		},
	}
	o.flags.AddFlags(cmd.Flags())
	return cmd
}

func (o *options) testCommand() *cobra.Command {
	var policy, evidence, pod, tenant, expect, now string
	cmd := &cobra.Command{
		Use:   "test --policy FILE --evidence FILE [--pod FILE]",
		Short: "Evaluate a policy against node evidence from files, without a cluster; the exit code says whether every node got the expected decision",
		Long: `test evaluates, with the evaluator library the scheduler and the webhook
link, a PlacementPolicy (and, in the same file, the tenant's TenantBinding)
against the NodeSecurityStates (and, optionally, their Nodes) in the
evidence file, for the pod in --pod or one of the binding's namespaces.
It prints one line per node and exits 0 when every node got the --expect
decision, 1 when one did not, 2 when the input is wrong.`,
		Example: `  kubectl xila-guard test --policy policy.yaml --evidence nodes.yaml
  kubectl xila-guard test --policy policy.yaml --evidence shared.yaml --expect deny`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policy == "" || evidence == "" {
				return errors.New("--policy and --evidence are required")
			}
			want := guard.Decision(expect)
			if want != guard.DecisionAllow && want != guard.DecisionDeny && want != guard.DecisionIndeterminate {
				return fmt.Errorf("--expect %q: want allow, deny or indeterminate", expect)
			}
			var clock evaluate.Clock // nil: the system clock
			if now != "" {
				t, err := time.Parse(time.RFC3339, now)
				if err != nil {
					return fmt.Errorf("--now: %w", err)
				}
				clock = fixedClock(t)
			}
			off, err := ReadOffline(policy, evidence, pod, tenant)
			if err != nil {
				return err
			}
			res, err := off.Test(guard.Profile(o.profile), clock)
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range res {
				if r.Decision != want {
					failed++
				}
			}
			PrintNodes(o.streams.Out, res)
			if failed > 0 {
				fmt.Fprintf(o.streams.Out, "\nFAIL: %d of %d node(s) not %s\n", failed, len(res), want)
				return &ExitCodeError{ExitFailed}
			}
			fmt.Fprintf(o.streams.Out, "\nPASS: %d node(s) %s\n", len(res), want)
			return nil
		},
	}
	cmd.Flags().StringVar(&policy, "policy", "", "file with the PlacementPolicy and, optionally, the tenant's TenantBinding")
	cmd.Flags().StringVar(&evidence, "evidence", "", "file with NodeSecurityStates and, optionally, their Nodes")
	cmd.Flags().StringVar(&pod, "pod", "", "file with the Pod (its namespace picks the tenant's namespace)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant, when the policy file has no TenantBinding")
	cmd.Flags().StringVar(&expect, "expect", string(guard.DecisionAllow), "the decision every node must get: allow, deny or indeterminate")
	cmd.Flags().StringVar(&now, "now", "", "evaluate at this time (RFC 3339), for evidence files with fixed timestamps; default the current time")
	return cmd
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func (o *options) statusCommand() *cobra.Command {
	var ns string
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Components, versions, webhook and evaluator health, evidence freshness per pool and recent violations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cs, err := o.clients()
			if err != nil {
				return err
			}
			h, err := Status(cmd.Context(), c, cs, ns, window, time.Now())
			if err != nil {
				return err
			}
			PrintHealth(o.streams.Out, h)
			if !h.OK() {
				return &ExitCodeError{ExitFailed}
			}
			return nil
		},
	}
	o.flags.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&ns, "platform-namespace", DefaultNamespace, "the namespace Xila Guard is installed in")
	cmd.Flags().DurationVar(&window, "since", time.Hour, "how far back violations are counted")
	return cmd
}

// PrintExplanation writes an explanation for people.
func PrintExplanation(w io.Writer, e *Explanation) {
	where := "not bound to a node"
	if e.Bound() {
		where = "bound to " + e.Node
	}
	fmt.Fprintf(w, "Pod %s/%s (%s, %s)\n", e.Namespace, e.Name, e.Phase, where)
	if !e.Protected {
		fmt.Fprintln(w, "Not protected: its namespace belongs to no tenant, so Xila Guard does not judge where it runs.")
		printEvents(w, e.Events)
		return
	}
	tenant, policy := e.Tenant, e.Policy
	if tenant == "" {
		tenant = "(unresolved)"
	}
	if policy == "" {
		policy = "(none)"
	}
	fmt.Fprintf(w, "Tenant %s, policy %s, profile %s\n", tenant, policy, e.Profile)
	if e.Note != "" {
		fmt.Fprintf(w, "Note: %s\n", e.Note)
	}
	if e.Pod.Decision != "" && e.Pod.Decision != guard.DecisionAllow {
		fmt.Fprintf(w, "\nRefused on every node (%s): %s\n", e.Pod.Decision, e.Pod.Message)
		if fix := Fix(e.Pod.Reasons, e.Policy, ""); fix != "" {
			fmt.Fprintf(w, "Fix: %s\n", fix)
		}
		printEvents(w, e.Events)
		return
	}
	fmt.Fprintln(w)
	PrintNodes(w, e.Nodes)
	if len(e.Devices) > 0 || e.DeviceNote != "" {
		fmt.Fprintln(w)
		printDevices(w, e)
	}
	fmt.Fprintln(w)
	switch {
	case e.Bound() && e.Allowed():
		fmt.Fprintf(w, "Still admitted: the policy allows the pod on %s now.\n", e.Node)
	case e.Bound():
		fmt.Fprintf(w, "Drift: the pod runs on %s, where the policy does not allow it now.\n", e.Node)
	case e.Allowed():
		fmt.Fprintln(w, "Xila Guard allows some nodes: if the pod is Pending, another scheduling constraint (resources, taints, affinity) refuses them; see the events.")
	default:
		fmt.Fprintln(w, "Xila Guard refuses every node.")
	}
	printEvents(w, e.Events)
}

func printEvents(w io.Writer, evs []string) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nLatest events:")
	for _, e := range evs {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// printDevices writes one line per device the pod's claims hold.
func printDevices(w io.Writer, e *Explanation) {
	if e.DeviceNote != "" {
		fmt.Fprintf(w, "Devices not judged: %s\n", e.DeviceNote)
	}
	if len(e.Devices) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tDEVICE\tNODE\tDECISION\tREASONS\tWHY")
	for _, d := range e.Devices {
		reasons, why := "-", d.Fact
		if len(d.Reasons) > 0 {
			rs := make([]string, len(d.Reasons))
			for i, r := range d.Reasons {
				rs[i] = string(r)
			}
			reasons = strings.Join(rs, ",")
		}
		if why == "" {
			why = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Claim, d.Device, d.Node, d.Decision, reasons, why)
	}
	_ = tw.Flush()
}

// PrintNodes writes one line per node: decision, reasons, the fact that
// decided it and the fix.
func PrintNodes(w io.Writer, nodes []NodeExplanation) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOOL\tDECISION\tREASONS\tWHY\tFIX")
	for _, n := range nodes {
		pool := n.Pool
		if pool == "" {
			pool = "-"
		}
		reasons := "-"
		if len(n.Reasons) > 0 {
			rs := make([]string, len(n.Reasons))
			for i, r := range n.Reasons {
				rs[i] = string(r)
			}
			reasons = strings.Join(rs, ",")
		}
		fix := n.Fix
		if fix == "" {
			fix = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, pool, n.Decision, reasons, n.Fact, fix)
	}
	_ = tw.Flush()
}

// PrintHealth writes an installation's health for people.
func PrintHealth(w io.Writer, h *Health) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COMPONENT (%s)\tREADY\tVERSION\t\n", h.Namespace)
	for _, c := range h.Components {
		mark := "ok"
		if !c.OK() {
			mark = "NOT READY"
		}
		fmt.Fprintf(tw, "%s/%s\t%d/%d\t%s\t%s\n", strings.ToLower(c.Kind), c.Name, c.Ready, c.Desired, strings.Join(c.Versions, ","), mark)
	}
	if len(h.Components) == 0 {
		fmt.Fprintf(tw, "(none: is Xila Guard installed in %s? --platform-namespace)\t\t\t\n", h.Namespace)
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WEBHOOK\tFAILURE POLICY\tSERVICE\tENDPOINTS\t")
	for _, wh := range h.Webhooks {
		mark := "ok"
		if wh.Endpoints == 0 {
			mark = "NO ENDPOINT"
			if wh.FailurePolicy == "Fail" {
				mark += ": its requests fail"
			}
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%s\n", wh.Configuration, wh.Name, wh.FailurePolicy, wh.Service, wh.Endpoints, mark)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "Webhook probe: %s\n", h.Probe)
	fmt.Fprintf(w, "Evaluator: %s\n", h.Evaluator)

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tSTATES\tREADY\tSTALE\tOLDEST EVIDENCE\t")
	for _, p := range h.Pools {
		mark := "ok"
		if p.Ready < p.States {
			mark = "NOT READY: kubectl get nss -l " + guard.LabelTenantPool + "=" + p.Pool
		}
		if p.Unjudged > 0 {
			mark += fmt.Sprintf(" (%d without status, judged by age: is the observe controller on?)", p.Unjudged)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", p.Pool, p.States, p.Ready, p.Stale, p.Oldest.Round(time.Second), mark)
	}
	_ = tw.Flush()

	v := h.Violations
	fmt.Fprintf(w, "\nViolations in the last %s: %d\n", v.Since, v.Events)
	for _, l := range v.Latest {
		fmt.Fprintf(w, "  %s\n", l)
	}
	switch {
	case v.Reports:
		fmt.Fprintf(w, "PolicyReports: %d fail, %d error (kubectl get policyreport -A)\n", v.ReportFail, v.ReportError)
	case v.ReportsError != "":
		fmt.Fprintf(w, "PolicyReports: not readable: %s\n", v.ReportsError)
	}
	if h.OK() {
		fmt.Fprintln(w, "\nHealthy.")
	} else {
		fmt.Fprintln(w, "\nNOT HEALTHY: see the lines marked above.")
	}
}
