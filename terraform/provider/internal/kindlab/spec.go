package kindlab

import (
	"fmt"
	"net/netip"
	"regexp"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// Defaults of the lab cluster; they match hack/kind/cluster.yaml.
const (
	DefaultWorkers       = 2
	DefaultPodSubnet     = "10.244.0.0/16"
	DefaultServiceSubnet = "10.96.0.0/16"
	// MaxWorkers bounds a lab on one machine.
	MaxWorkers = 10
)

// DefaultNodeImage is the offline node image built by make kind-image. The
// build stamps it from hack/versions.env (NODE_IMAGE).
var DefaultNodeImage = "xila-guard/kind-node:v1.35.4"

// cgroupV1Patch keeps the kubelet running on hosts that still use cgroup v1,
// as hack/kind/cluster.yaml does.
const cgroupV1Patch = `kind: KubeletConfiguration
failCgroupV1: false
`

var clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// Spec is what a lab cluster is made of. Changing any field means a new
// cluster.
type Spec struct {
	Name          string
	NodeImage     string
	Workers       int
	PodSubnet     string
	ServiceSubnet string
}

// Validate reports the first field that kind or the network set-up would
// refuse, naming the field.
func (s Spec) Validate() error {
	if !clusterName.MatchString(s.Name) {
		return fmt.Errorf("name %q: must be 1-32 lower-case letters, digits or '-', starting and ending with a letter or digit (it prefixes the node container names)", s.Name)
	}
	if s.NodeImage == "" {
		return fmt.Errorf("node_image: must not be empty")
	}
	if s.Workers < 0 || s.Workers > MaxWorkers {
		return fmt.Errorf("workers %d: must be between 0 and %d", s.Workers, MaxWorkers)
	}
	pods, err := netip.ParsePrefix(s.PodSubnet)
	if err != nil || !pods.Addr().Is4() {
		return fmt.Errorf("pod_subnet %q: must be an IPv4 CIDR such as %s", s.PodSubnet, DefaultPodSubnet)
	}
	svcs, err := netip.ParsePrefix(s.ServiceSubnet)
	if err != nil || !svcs.Addr().Is4() {
		return fmt.Errorf("service_subnet %q: must be an IPv4 CIDR such as %s", s.ServiceSubnet, DefaultServiceSubnet)
	}
	if pods.Overlaps(svcs) {
		return fmt.Errorf("pod_subnet %s and service_subnet %s overlap", pods, svcs)
	}
	if pods.Bits() > 22 {
		return fmt.Errorf("pod_subnet %s: too small, every node takes a /24 from it", pods)
	}
	return nil
}

// Nodes is the number of nodes of the cluster: the control plane and the
// workers.
func (s Spec) Nodes() int { return 1 + s.Workers }

// KindConfig is the kind cluster configuration for s: one control plane,
// s.Workers workers, kind's own CNI off (pod networking comes from
// ConfigureNetwork).
func (s Spec) KindConfig() *v1alpha4.Cluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Networking: v1alpha4.Networking{
			DisableDefaultCNI: true,
			PodSubnet:         s.PodSubnet,
			ServiceSubnet:     s.ServiceSubnet,
		},
		Nodes:                []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole}},
		KubeadmConfigPatches: []string{cgroupV1Patch},
		// DeviceTaintRules, alpha in Kubernetes 1.35, which the observe
		// controller writes for DRA devices whose evidence fails; and
		// resource.k8s.io/v1beta1, in which the DRA example driver's chart
		// writes its DeviceClass.
		FeatureGates:  map[string]bool{"DRADeviceTaints": true, "DRADeviceTaintRules": true},
		RuntimeConfig: map[string]string{"resource.k8s.io/v1alpha3": "true", "resource.k8s.io/v1beta1": "true"},
	}
	for range s.Workers {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole})
	}
	v1alpha4.SetDefaultsCluster(cfg)
	return cfg
}
