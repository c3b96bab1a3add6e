//go:build linux

package dataplane

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// agentSpec is what the helper agent process applies before it exits.
type agentSpec struct {
	PinPath   string
	Attach    AttachMode
	Namespace string
	Endpoints []agentEndpoint
}

type agentEndpoint struct {
	Endpoint        Endpoint
	Ingress, Egress rules.RuleSet
}

const agentSpecEnv = "XG_TEST_AGENT_SPEC"

// TestAgentProcess is not a test of its own: TestRestartKeepsEnforcing runs
// the test binary with it as a separate agent process, which applies a
// policy and exits, so that nothing of it but the pinned state remains.
func TestAgentProcess(t *testing.T) {
	raw := os.Getenv(agentSpecEnv)
	if raw == "" {
		return
	}
	var spec agentSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ns := &netns.NS{Name: spec.Namespace}
	err := ns.Do(func() error {
		d, err := Open(Config{PinPath: spec.PinPath, Attach: spec.Attach})
		if err != nil {
			return err
		}
		for _, ep := range spec.Endpoints {
			if err := d.Apply(ep.Endpoint, ep.Ingress, ep.Egress); err != nil {
				return err
			}
		}
		return d.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("agent applied and exits\n")
}

func runAgentProcess(t *testing.T, spec agentSpec) {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), agentSpecEnv+"="+string(raw))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "agent applied and exits") {
		t.Fatalf("agent process: %v\n%s", err, out)
	}
}

// TestRestartKeepsEnforcing: a policy applied by an agent process that has
// exited stays enforced; a new agent adopts the pinned state, moves the
// links to its own programs without breaking an established connection,
// and its next policy takes effect.
func TestRestartKeepsEnforcing(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode AttachMode
	}{{"tcx", AttachTCX}, {"clsact", AttachClsact}} {
		t.Run(mode.name, func(t *testing.T) { testRestart(t, mode.mode) })
	}
}

func testRestart(t *testing.T, mode AttachMode) {
	requireKernel(t, mode)
	node := netns.NewNode(t, 3)
	a, b, c := node.Pods[0], node.Pods[1], node.Pods[2]
	startServer(t, b, []int{8080}, nil)
	pin := bpffs(t)

	admit := func(p *netns.Pod) rules.RuleSet {
		return ruleSet(p.V4.String()+"/32", ports(rules.TCP, 8080, 8080))
	}
	runAgentProcess(t, agentSpec{PinPath: pin, Attach: mode, Namespace: node.NS.Name, Endpoints: []agentEndpoint{
		{endpointOf(a), rules.AllowAll, rules.AllowAll},
		{endpointOf(b), admit(a), rules.AllowAll},
		{endpointOf(c), rules.AllowAll, rules.AllowAll},
	}})
	checkProbes(t, []probe{
		{"a to b with no agent running", a, ap(b.V4, 8080), false, "pod1"},
		{"c to b with no agent running", c, ap(b.V4, 8080), false, ""},
	})

	conn, err := dial(a, ap(b.V4, 8080), time.Second)
	if err != nil {
		t.Fatalf("a cannot connect to b: %v", err)
	}
	defer conn.Close()
	echo := echoer(t, conn, "pod1", time.Second)
	if err := echo(); err != nil {
		t.Fatalf("echo before restart: %v", err)
	}

	d := openIn(t, node.NS, Config{PinPath: pin, Attach: mode})
	eps, err := d.Endpoints()
	if err != nil || len(eps) != 3 {
		t.Fatalf("Endpoints() = %v, %v; want the 3 endpoints of the first agent", eps, err)
	}
	if n := d.generationCount(); n != 1 {
		t.Fatalf("recovered %d generations, want 1", n)
	}
	if err := echo(); err != nil {
		t.Fatalf("established connection broke across the restart: %v", err)
	}
	mustApplyIn(t, node.NS, d, endpointOf(b), admit(c), rules.AllowAll)
	assertProgramsAttached(t, node.NS, b.Ifindex, d)
	checkProbes(t, []probe{
		{"c to b under the new agent's policy", c, ap(b.V4, 8080), false, "pod1"},
		{"a to b under the new agent's policy", a, ap(b.V4, 8080), false, ""},
	})
	if n := d.generationCount(); n != 1 {
		t.Fatalf("%d generations after the new policy, want 1 (the old one deleted)", n)
	}
}

// assertProgramsAttached checks that an interface runs the given
// dataplane's programs, through pinned tcx links or clsact filters.
func assertProgramsAttached(t *testing.T, ns *netns.NS, ifindex int, d *Dataplane) {
	t.Helper()
	progs := map[string]*ebpf.Program{"ingress": d.objs.XgFromPod, "egress": d.objs.XgToPod}
	if d.mode == AttachClsact {
		for dir, parent := range map[string]uint32{"ingress": netlink.HANDLE_MIN_INGRESS, "egress": netlink.HANDLE_MIN_EGRESS} {
			var filters []netlink.Filter
			err := ns.Do(func() (err error) {
				l, err := netlink.LinkByIndex(ifindex)
				if err != nil {
					return err
				}
				filters, err = netlink.FilterList(l, parent)
				return err
			})
			if err != nil || len(filters) != 1 {
				t.Fatalf("%s filters = %v, %v; want exactly ours", dir, filters, err)
			}
			want, err := progID(progs[dir])
			if err != nil {
				t.Fatal(err)
			}
			if got := filters[0].(*netlink.BpfFilter).Id; got != int(want) {
				t.Fatalf("%s filter runs program %d, want the new agent's %d", dir, got, want)
			}
		}
		return
	}
	for dir, prog := range progs {
		l, err := link.LoadPinnedLink(d.linkPin(ifindex, dir), nil)
		if err != nil {
			t.Fatalf("loading pinned %s link: %v", dir, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, err := progID(prog)
		if err != nil {
			t.Fatal(err)
		}
		if info.Program != want {
			t.Fatalf("%s link runs program %d, want the new agent's %d", dir, info.Program, want)
		}
	}
}

func progID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("program id not available")
	}
	return id, nil
}

// TestRestartForgetsVanishedInterfaces: a pod deleted while no agent ran
// leaves pinned state behind; the next agent removes it.
func TestRestartForgetsVanishedInterfaces(t *testing.T) {
	requireKernel(t, AttachTCX)
	node := netns.NewNode(t, 2)
	a, b := node.Pods[0], node.Pods[1]
	pin := bpffs(t)
	admit := ruleSet("10.9.0.0/16", ports(rules.TCP, 80, 80))
	runAgentProcess(t, agentSpec{PinPath: pin, Namespace: node.NS.Name, Endpoints: []agentEndpoint{
		{endpointOf(a), admit, rules.AllowAll},
		{endpointOf(b), admit, rules.DenyAll},
	}})
	node.NS.MustRun(t, "ip", "link", "del", b.HostIf)

	d := openIn(t, node.NS, Config{PinPath: pin})
	eps, err := d.Endpoints()
	if err != nil || len(eps) != 1 || eps[0] != a.Ifindex {
		t.Fatalf("Endpoints() = %v, %v; want only %d", eps, err, a.Ifindex)
	}
	if n := d.generationCount(); n != 1 {
		t.Fatalf("%d generations left, want 1 (a's)", n)
	}
	for _, dir := range []string{"ingress", "egress"} {
		if _, err := os.Stat(d.linkPin(b.Ifindex, dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("pinned %s link of the vanished interface: %v", dir, err)
		}
	}
}
