package kindlab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

func validSpec() Spec {
	return Spec{Name: "xg-lab", NodeImage: DefaultNodeImage, Workers: 2, PodSubnet: DefaultPodSubnet, ServiceSubnet: DefaultServiceSubnet}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{name: "valid", mutate: func(*Spec) {}},
		{name: "no workers", mutate: func(s *Spec) { s.Workers = 0 }},
		{name: "upper-case name", mutate: func(s *Spec) { s.Name = "XG" }, wantErr: `name "XG": must be 1-32 lower-case letters`},
		{name: "long name", mutate: func(s *Spec) { s.Name = strings.Repeat("a", 33) }, wantErr: "must be 1-32"},
		{name: "too many workers", mutate: func(s *Spec) { s.Workers = 11 }, wantErr: "workers 11: must be between 0 and 10"},
		{name: "bad pod subnet", mutate: func(s *Spec) { s.PodSubnet = "10.244.0.0" }, wantErr: `pod_subnet "10.244.0.0": must be an IPv4 CIDR`},
		{name: "IPv6 service subnet", mutate: func(s *Spec) { s.ServiceSubnet = "fd00::/108" }, wantErr: `service_subnet "fd00::/108": must be an IPv4 CIDR`},
		{name: "overlap", mutate: func(s *Spec) { s.ServiceSubnet = "10.244.128.0/20" }, wantErr: "overlap"},
		{name: "pod subnet too small", mutate: func(s *Spec) { s.PodSubnet = "10.244.0.0/24" }, wantErr: "too small"},
		{name: "no image", mutate: func(s *Spec) { s.NodeImage = "" }, wantErr: "node_image: must not be empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(&s)
			err := s.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestKindConfigMatchesMakeKindUp compares the generated configuration with
// hack/kind/cluster.yaml, the one make kind-up uses.
func TestKindConfigMatchesMakeKindUp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "hack", "kind", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want v1alpha4.Cluster
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	v1alpha4.SetDefaultsCluster(&want)
	got := validSpec().KindConfig()
	if !reflect.DeepEqual(got.Networking, want.Networking) {
		t.Errorf("networking = %+v, want %+v", got.Networking, want.Networking)
	}
	if len(got.Nodes) != len(want.Nodes) {
		t.Fatalf("%d nodes, want %d", len(got.Nodes), len(want.Nodes))
	}
	for i := range got.Nodes {
		if got.Nodes[i].Role != want.Nodes[i].Role {
			t.Errorf("node %d role = %s, want %s", i, got.Nodes[i].Role, want.Nodes[i].Role)
		}
	}
	if len(got.KubeadmConfigPatches) != 1 || len(want.KubeadmConfigPatches) != 1 {
		t.Fatalf("patches = %q, want %q", got.KubeadmConfigPatches, want.KubeadmConfigPatches)
	}
	var gp, wp map[string]any
	if err := yaml.Unmarshal([]byte(got.KubeadmConfigPatches[0]), &gp); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(want.KubeadmConfigPatches[0]), &wp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gp, wp) {
		t.Errorf("kubelet patch = %v, want %v", gp, wp)
	}
	s := validSpec()
	s.Workers = 0
	if n := len(s.KindConfig().Nodes); n != 1 {
		t.Errorf("0 workers: %d nodes, want 1", n)
	}
}

// TestCNIConfigMatchesKindNetworkScript compares the conflist with the one
// hack/kind-network.sh writes, so that make kind-up and the provider give
// pods the same network.
func TestCNIConfigMatchesKindNetworkScript(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "hack", "kind-network.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(raw)
	start := strings.Index(script, "<<JSON\n")
	end := strings.Index(script, "\nJSON\n")
	if start < 0 || end < start {
		t.Fatal("hack/kind-network.sh has no <<JSON here-document")
	}
	const cidr = "10.244.1.0/24"
	fromScript := strings.ReplaceAll(script[start+len("<<JSON\n"):end], "${cidr}", cidr)
	var want, got any
	if err := json.Unmarshal([]byte(fromScript), &want); err != nil {
		t.Fatalf("script conflist: %v", err)
	}
	if err := json.Unmarshal([]byte(CNIConfig(cidr)), &got); err != nil {
		t.Fatalf("CNIConfig: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CNIConfig = %v\nhack/kind-network.sh writes %v", got, want)
	}
	for _, step := range []string{"iptables -t nat -C POSTROUTING -s ${cidr} ! -d ${POD_SUBNET} -j MASQUERADE", `ip route replace ${peer_cidr} via ${peer_ip}`} {
		if !strings.Contains(script, step) {
			t.Errorf("hack/kind-network.sh no longer has %q: update NetworkScript to match", step)
		}
	}
}

func TestNetworkScript(t *testing.T) {
	all := []NodeNetwork{
		{Name: "lab-control-plane", PodCIDR: "10.244.0.0/24", InternalIP: "172.18.0.2"},
		{Name: "lab-worker", PodCIDR: "10.244.1.0/24", InternalIP: "172.18.0.3"},
		{Name: "lab-worker2", PodCIDR: "10.244.2.0/24", InternalIP: "172.18.0.4"},
	}
	got := NetworkScript(all[1], all, DefaultPodSubnet)
	for _, want := range []string{
		"mv /etc/cni/net.d/10-xila-guard-ptp.conflist.tmp /etc/cni/net.d/10-xila-guard-ptp.conflist\n",
		"iptables -t nat -C POSTROUTING -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE 2>/dev/null ||\n  iptables -t nat -A POSTROUTING -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE\n",
		"ip route replace 10.244.0.0/24 via 172.18.0.2\n",
		"ip route replace 10.244.2.0/24 via 172.18.0.4\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "10.244.1.0/24 via") {
		t.Errorf("script routes the node's own pod CIDR away:\n%s", got)
	}
}

func TestNetworksOfWaitsForEveryNode(t *testing.T) {
	node := func(name, cidr, ip string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
		if ip != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
		}
		return n
	}
	if _, ok := networksOf(nil); ok {
		t.Error("no nodes: ready")
	}
	if _, ok := networksOf([]corev1.Node{node("b", "10.244.1.0/24", "172.18.0.3"), node("a", "", "172.18.0.2")}); ok {
		t.Error("node without pod CIDR: ready")
	}
	if _, ok := networksOf([]corev1.Node{node("b", "10.244.1.0/24", "")}); ok {
		t.Error("node without InternalIP: ready")
	}
	got, ok := networksOf([]corev1.Node{node("b", "10.244.1.0/24", "172.18.0.3"), node("a", "10.244.0.0/24", "172.18.0.2")})
	want := []NodeNetwork{{"a", "10.244.0.0/24", "172.18.0.2"}, {"b", "10.244.1.0/24", "172.18.0.3"}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("networksOf = %v, %v; want %v", got, ok, want)
	}
}
