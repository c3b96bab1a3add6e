package kindlab

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var labNodes = []NodeNetwork{
	{Name: "lab-control-plane", PodCIDR: "10.244.0.0/24", InternalIP: "172.18.0.2"},
	{Name: "lab-worker", PodCIDR: "10.244.1.0/24", InternalIP: "172.18.0.3"},
	{Name: "lab-worker2", PodCIDR: "10.244.2.0/24", InternalIP: "172.18.0.4"},
}

func TestNetworkCommand(t *testing.T) {
	got := NetworkCommand(labNodes[1], labNodes, DefaultPodSubnet)
	want := []string{"bash", "-c", nodeNetworkScript, "node-network.sh", "10.244.1.0/24", "10.244.0.0/16",
		"10.244.0.0/24=172.18.0.2", "10.244.2.0/24=172.18.0.4"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NetworkCommand = %q, want %q", got[3:], want[3:])
	}
}

// TestKindNetworkScriptSharesNodeNetworkScript keeps one copy of the lab's
// pod network: hack/kind-network.sh runs node-network.sh, and nothing under
// hack/ carries a CNI configuration of its own.
func TestKindNetworkScriptSharesNodeNetworkScript(t *testing.T) {
	hack := filepath.Join("..", "..", "..", "..", "hack")
	lib, err := os.ReadFile(filepath.Join(hack, "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lib), `NODE_NETWORK_SCRIPT="${REPO_ROOT}/terraform/provider/internal/kindlab/node-network.sh"`) {
		t.Error("hack/lib.sh no longer points NODE_NETWORK_SCRIPT at this package's node-network.sh")
	}
	script, err := os.ReadFile(filepath.Join(hack, "kind-network.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), `"${NODE_NETWORK_SCRIPT}"`) {
		t.Error("hack/kind-network.sh no longer runs ${NODE_NETWORK_SCRIPT}")
	}
	err = filepath.WalkDir(hack, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(raw), `"cniVersion"`) {
			t.Errorf("%s has a CNI configuration of its own: render node-network.sh instead", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runNodeNetwork runs node-network.sh as NetworkCommand does, with ip,
// iptables, mount and mountpoint replaced by stubs that log their
// arguments; "ip -4 route show" prints routes. It returns the log, the
// conflist written, and the script's error.
func runNodeNetwork(t *testing.T, args []string, routes string) (calls []string, conflist string, err error) {
	t.Helper()
	dir := t.TempDir()
	bin, confDir, logFile := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d"), filepath.Join(dir, "calls")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stubs := map[string]string{
		"mountpoint": "exit 1",
		"mount":      "",
		// -N fails as for an existing chain; -C fails as for a missing rule.
		"iptables": `case " $* " in *" -N "*|*" -C "*) exit 1;; esac`,
		"ip":       `if [[ "$*" == "-4 route show "* ]]; then printf '%s' "$ROUTES"; fi`,
	}
	for name, body := range stubs {
		stub := "#!/usr/bin/env bash\necho \"" + name + " $*\" >>\"$CALLS\"\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CNI_CONF_DIR="+confDir, "CALLS="+logFile, "ROUTES="+routes)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("node-network.sh: %s", out)
	}
	raw, _ := os.ReadFile(logFile)
	conf, _ := os.ReadFile(filepath.Join(confDir, "10-xila-guard-ptp.conflist"))
	if leftovers, _ := filepath.Glob(filepath.Join(confDir, "*.tmp")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n"), string(conf), err
}

func TestNodeNetworkScript(t *testing.T) {
	// What the kernel holds on lab-worker: a peer route with an old
	// gateway, a route left from a node that is gone, its own pod CIDR
	// routed away (a CIDR that moved), and a pod's route through its veth.
	routes := "10.244.0.0/24 via 172.18.0.9 dev eth0\n" +
		"10.244.7.0/24 via 172.18.0.7 dev eth0\n" +
		"10.244.1.0/24 via 172.18.0.4 dev eth0\n" +
		"10.244.1.5 dev veth1234 scope host\n"
	calls, conflist, err := runNodeNetwork(t, NetworkCommand(labNodes[1], labNodes, DefaultPodSubnet), routes)
	if err != nil {
		t.Fatalf("node-network.sh: %v", err)
	}
	want := []string{
		"mountpoint -q /sys/fs/bpf",
		"mount -t bpf bpf /sys/fs/bpf",
		"iptables -t nat -N XG-LAB-MASQ",
		"iptables -t nat -F XG-LAB-MASQ",
		"iptables -t nat -A XG-LAB-MASQ -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE",
		"iptables -t nat -C POSTROUTING -j XG-LAB-MASQ",
		"iptables -t nat -A POSTROUTING -j XG-LAB-MASQ",
		"ip route replace 10.244.0.0/24 via 172.18.0.2",
		"ip route replace 10.244.2.0/24 via 172.18.0.4",
		"ip -4 route show root 10.244.0.0/16",
		"ip route del 10.244.7.0/24",
		"ip route del 10.244.1.0/24",
	}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	var got struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []struct {
			Type string `json:"type"`
			IPAM struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(conflist), &got); err != nil {
		t.Fatalf("conflist is not JSON: %v\n%s", err, conflist)
	}
	if got.Name != "xila-guard-lab" || len(got.Plugins) != 2 || got.Plugins[0].Type != "ptp" || got.Plugins[1].Type != "portmap" {
		t.Errorf("conflist = %+v, want ptp then portmap in network xila-guard-lab", got)
	}
	if ipam := got.Plugins[0].IPAM; ipam.Type != "host-local" || len(ipam.Ranges) != 1 || ipam.Ranges[0][0]["subnet"] != "10.244.1.0/24" {
		t.Errorf("ipam = %+v, want host-local from 10.244.1.0/24", ipam)
	}
}

func TestNodeNetworkScriptAlone(t *testing.T) {
	single := []NodeNetwork{labNodes[0]}
	calls, conflist, err := runNodeNetwork(t, NetworkCommand(single[0], single, DefaultPodSubnet), "10.244.3.0/24 via 172.18.0.5 dev eth0\n")
	if err != nil {
		t.Fatalf("node-network.sh: %v", err)
	}
	if !strings.Contains(conflist, `"subnet": "10.244.0.0/24"`) {
		t.Errorf("conflist lacks the node's pod CIDR:\n%s", conflist)
	}
	if last := calls[len(calls)-1]; last != "ip route del 10.244.3.0/24" {
		t.Errorf("last command = %q, want the stale route deleted", last)
	}
}

func TestNodeNetworkScriptRejectsBadPeer(t *testing.T) {
	args := []string{"bash", "-c", nodeNetworkScript, "node-network.sh", "10.244.1.0/24", DefaultPodSubnet, "10.244.0.0/24"}
	_, conflist, err := runNodeNetwork(t, args, "")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Fatalf("error = %v, want exit status 2", err)
	}
	if conflist != "" {
		t.Error("a conflist was written despite the bad peer")
	}
}
