package app

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/dataplane"
)

// Mode is what the agent does with the policy it compiles.
type Mode string

const (
	// ModeEnforce loads the dataplane and enforces (the default).
	ModeEnforce Mode = "enforce"
	// ModeAudit compiles and reports (logs, metrics, Events) but enforces
	// nothing; a dataplane an enforcing agent left is removed at start.
	ModeAudit Mode = "audit"
	// ModeCleanup removes the pinned dataplane and exits.
	ModeCleanup Mode = "cleanup"
)

// DefaultPinPath is where the maps, programs and links are pinned.
const DefaultPinPath = "/sys/fs/bpf/xila-guard"

// Options are the agent's settings, one flag each.
type Options struct {
	Kubeconfig   string
	NodeName     string
	Mode         Mode
	PinPath      string
	Attach       dataplane.AttachMode
	ServiceCIDRs []netip.Prefix
	Listen       string
	Resync       time.Duration
	// DaemonSet ("namespace/name") owns the agent: when it is gone at
	// exit, the agent was uninstalled and removes the dataplane.
	DaemonSet string
	LogLevel  string
}

// ParseFlags reads the options from args; usage goes to out.
func ParseFlags(args []string, out io.Writer) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("xila-guard-agent", flag.ContinueOnError)
	fs.SetOutput(out)
	var mode, attach, cidrs string
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses the in-cluster config or $KUBECONFIG")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node this agent enforces (default $NODE_NAME)")
	fs.StringVar(&mode, "mode", string(ModeEnforce), "enforce, audit (compile and report, enforce nothing) or cleanup (remove the dataplane and exit)")
	fs.StringVar(&o.PinPath, "pin-path", DefaultPinPath, "directory on a bpffs mount for the pinned maps, programs and links")
	fs.StringVar(&attach, "attach", "auto", "tc attach mode: auto, tcx or clsact")
	fs.StringVar(&cidrs, "service-cidrs", "10.96.0.0/16", "comma-separated Service CIDRs; pod egress to them is judged after DNAT")
	fs.StringVar(&o.Listen, "listen-address", ":9471", "address of /metrics, /healthz and /readyz")
	fs.DurationVar(&o.Resync, "resync", 30*time.Second, "reconcile at least this often")
	fs.StringVar(&o.DaemonSet, "daemonset", "", "namespace/name of the agent's DaemonSet: if it is gone when the agent stops, the dataplane is removed; empty keeps it always")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Mode = Mode(mode)
	switch o.Mode {
	case ModeEnforce, ModeAudit, ModeCleanup:
	default:
		return nil, fmt.Errorf("--mode %q: want %s, %s or %s", mode, ModeEnforce, ModeAudit, ModeCleanup)
	}
	switch attach {
	case "auto":
		o.Attach = dataplane.AttachAuto
	case "tcx":
		o.Attach = dataplane.AttachTCX
	case "clsact":
		o.Attach = dataplane.AttachClsact
	default:
		return nil, fmt.Errorf("--attach %q: want auto, tcx or clsact", attach)
	}
	for _, s := range strings.Split(cidrs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--service-cidrs: %w", err)
		}
		o.ServiceCIDRs = append(o.ServiceCIDRs, p.Masked())
	}
	if o.DaemonSet != "" {
		if ns, name, ok := strings.Cut(o.DaemonSet, "/"); !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--daemonset %q: want namespace/name", o.DaemonSet)
		}
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return nil, err
	}
	switch {
	case o.Mode != ModeCleanup && o.NodeName == "":
		return nil, fmt.Errorf("no node name: set --node-name or $NODE_NAME")
	case o.Resync <= 0:
		return nil, fmt.Errorf("--resync must be positive")
	case o.PinPath == "":
		return nil, fmt.Errorf("--pin-path must not be empty")
	}
	return o, nil
}
