package kindlab

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
	if !reflect.DeepEqual(got.FeatureGates, want.FeatureGates) || !reflect.DeepEqual(got.RuntimeConfig, want.RuntimeConfig) {
		t.Errorf("feature gates %v and runtime config %v, want %v and %v", got.FeatureGates, got.RuntimeConfig, want.FeatureGates, want.RuntimeConfig)
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
