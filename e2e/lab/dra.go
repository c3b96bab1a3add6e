package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The DRA example driver (sigs.k8s.io/dra-example-driver) as the lab runs
// it: its kubelet plugin on the workers, each publishing simulated GPUs in
// a ResourceSlice of its own pool, and its chart's DeviceClass.
const (
	// DRADriver is the driver's name, and its DeviceClass's.
	DRADriver    = "gpu.example.com"
	DRANamespace = "dra-example-driver"
	draRelease   = "dra-example-driver"
	// DRAAccount is the kubelet plugin's service account. Its DaemonSet's
	// pods reach the pools because the release trusts it (DRADriverTrust).
	DRAAccount = "system:serviceaccount:" + DRANamespace + ":" + draRelease + "-service-account"
)

// DRADriverTrust are the release values that let the driver's kubelet
// plugin DaemonSet onto the pools, as an operator lists every
// infrastructure DaemonSet that runs there.
func DRADriverTrust() map[string]any {
	return map[string]any{"webhook": map[string]any{"trustedServiceAccounts": []any{DRAAccount}}}
}

// InstallDRADriver installs the driver from its chart (a directory of its
// module) with image: n GPUs per node, the kubelet plugin on every worker
// tolerating the pools' taint, and none of the chart's optional parts. It
// waits until the ResourceSlice of each of workers publishes n devices,
// and returns the slices by node.
func (c *Cluster) InstallDRADriver(ctx context.Context, chart, image string, n int, workers []string) (map[string]*resourcev1.ResourceSlice, error) {
	i := strings.LastIndex(image, ":")
	if i < 0 {
		return nil, fmt.Errorf("image %q has no tag", image)
	}
	values := map[string]any{
		"image": map[string]any{"repository": image[:i], "tag": image[i+1:], "pullPolicy": "Never"},
		"kubeletPlugin": map[string]any{
			"numDevices":  n,
			"tolerations": []any{map[string]any{"key": PoolLabel, "operator": "Exists", "effect": "NoSchedule"}},
			"containers":  map[string]any{"plugin": map[string]any{"healthcheckPort": -1}},
		},
	}
	if err := c.helmUpgrade(ctx, draRelease, DRANamespace, chart, values); err != nil {
		return nil, err
	}
	out := map[string]*resourcev1.ResourceSlice{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + DRADriver})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.NodeName != nil && slices.Contains(workers, *s.Spec.NodeName) && len(s.Spec.Devices) == n {
				out[*s.Spec.NodeName] = s
			}
		}
		return len(out) == len(workers), nil
	})
	if err != nil {
		return out, fmt.Errorf("the driver published %d GPUs on %d of the workers %v: %w", n, len(out), workers, err)
	}
	return out, nil
}

// UninstallDRADriver removes the driver, and the slices its plugins
// published.
func (c *Cluster) UninstallDRADriver(ctx context.Context) error {
	if err := c.run(ctx, "helm", "uninstall", draRelease, "-n", DRANamespace, "--wait", "--ignore-not-found"); err != nil {
		return err
	}
	return c.Kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "spec.driver=" + DRADriver})
}

// DRADevice is a device of a worker's slice that the evidence names, in a
// sharing mode (empty: the worker's, exclusive on worker 1 and
// time-sliced on worker 2).
type DRADevice struct {
	Name string
	Mode v1alpha1.GPUSharingMode
}

// DRAEvidence gives the tenant's workers mock evidence that names their
// DRA devices, as an evidence source that inventories the GPUs would: on
// each worker the devices named[worker] of its slice, by the uuid and
// model the slice states. A device of the slice that is not named has no
// evidence.
func (t *Tenant) DRAEvidence(ctx context.Context, slices map[string]*resourcev1.ResourceSlice, named map[string][]DRADevice) error {
	return t.writeEvidence(ctx, func(node string, mode v1alpha1.GPUSharingMode) ([]v1alpha1.GPUDevice, error) {
		s := slices[node]
		if s == nil {
			return nil, fmt.Errorf("no slice of node %s", node)
		}
		var out []v1alpha1.GPUDevice
		for _, nd := range named[node] {
			uuid, model, err := DRAGPU(s, nd.Name)
			if err != nil {
				return nil, err
			}
			m := nd.Mode
			if m == "" {
				m = mode
			}
			out = append(out, v1alpha1.GPUDevice{ID: uuid, Vendor: "example", Model: model, SharingMode: m,
				DRA: &v1alpha1.DRADeviceRef{Driver: DRADriver, Pool: s.Spec.Pool.Name, Device: nd.Name}})
		}
		return out, nil
	})
}

// DRAGPU is the uuid and model the driver's slice states of its device.
func DRAGPU(s *resourcev1.ResourceSlice, device string) (uuid, model string, err error) {
	i := slicesIndex(s.Spec.Devices, device)
	if i < 0 {
		return "", "", fmt.Errorf("the slice %s has no device %s", s.Name, device)
	}
	attr := func(a string) string {
		if v := s.Spec.Devices[i].Attributes[resourcev1.QualifiedName(a)].StringValue; v != nil {
			return *v
		}
		return ""
	}
	return attr("uuid"), attr("model"), nil
}

func slicesIndex(devs []resourcev1.Device, name string) int {
	return slices.IndexFunc(devs, func(d resourcev1.Device) bool { return d.Name == name })
}
