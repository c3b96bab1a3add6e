package devices

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// GPU drivers whose opaque configuration is read: how it shares a device
// is judged against the tenant's gpuSharing.
const (
	// NVIDIADriver is the NVIDIA DRA driver (sigs.k8s.io/dra-driver-nvidia-gpu).
	NVIDIADriver = "gpu.nvidia.com"
	// ExampleDriver is the Kubernetes example DRA driver
	// (sigs.k8s.io/dra-example-driver), the lab's GPUs.
	ExampleDriver = "gpu.example.com"
)

// Config is one opaque configuration of a claim, or of an allocation: the
// requests it applies to (every request when empty) and its parameters.
type Config struct {
	Requests []string
	Opaque   *resourcev1.OpaqueDeviceConfiguration
}

// ClaimConfigs are the configurations a claim passes.
func ClaimConfigs(spec *resourcev1.ResourceClaimSpec) []Config {
	out := make([]Config, 0, len(spec.Devices.Config))
	for _, c := range spec.Devices.Config {
		out = append(out, Config{Requests: c.Requests, Opaque: c.Opaque})
	}
	return out
}

// AllocationConfigs are the configurations an allocation hands the driver:
// the DeviceClasses' and the claim's.
func AllocationConfigs(a *resourcev1.AllocationResult) []Config {
	out := make([]Config, 0, len(a.Devices.Config))
	for _, c := range a.Devices.Config {
		out = append(out, Config{Requests: c.Requests, Opaque: c.Opaque})
	}
	return out
}

// ForDriver keeps the configurations of one driver: a driver reads only
// its own, so only they set up the devices it hands out.
func ForDriver(configs []Config, driver string) []Config {
	var out []Config
	for _, c := range configs {
		if c.Opaque != nil && c.Opaque.Driver == driver {
			out = append(out, c)
		}
	}
	return out
}

// Applies reports whether the configuration applies to a request, named
// as a claim or an allocation result names it: <request> or
// <request>/<subrequest>.
func (c Config) Applies(request string) bool {
	if len(c.Requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	return slices.Contains(c.Requests, request) || slices.Contains(c.Requests, parent)
}

// gpuConfig is the part of the GPU drivers' configuration kinds that says
// how a device is shared: the NVIDIA driver's GpuConfig and
// MigDeviceConfig (resource.nvidia.com/v1beta1) and the example driver's
// GpuConfig (gpu.resource.example.com/v1alpha1) all carry
// sharing.strategy. The NVIDIA driver's module cannot be linked here (it
// requires Kubernetes 1.36 libraries), so the two fields are read by name.
type gpuConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Sharing    *struct {
		Strategy string `json:"strategy"`
	} `json:"sharing"`
}

// configKinds are the kinds of each read driver, and whether the kind can
// share a device.
var configKinds = map[string]map[string]bool{
	NVIDIADriver: {
		"GpuConfig": true, "MigDeviceConfig": true,
		"VfioDeviceConfig": false, "ComputeDomainChannelConfig": false, "ComputeDomainDaemonConfig": false,
	},
	ExampleDriver: {"GpuConfig": true},
}

// strategies maps the drivers' sharing strategies to sharing modes. The
// example driver's SpacePartitioning gives each claim a share of the
// device's compute at once, as MPS does.
var strategies = map[string]v1alpha1.GPUSharingMode{
	"TimeSlicing":       v1alpha1.SharingTimeSlicing,
	"MPS":               v1alpha1.SharingMPS,
	"SpacePartitioning": v1alpha1.SharingMPS,
}

// defaultSharing is how a driver sets up a device that no configuration
// of it applies to: the example driver time-slices it (its
// DefaultGpuConfig, which it puts before the allocation's configurations);
// the NVIDIA driver's defaults share nothing.
var defaultSharing = map[string]v1alpha1.GPUSharingMode{
	ExampleDriver: v1alpha1.SharingTimeSlicing,
}

// DriverSharing is how a driver sets up its device for a request: as its
// own configurations that apply say (Sharing), or, when none applies, as
// it does by default.
func DriverSharing(configs []Config, driver, request string) (v1alpha1.GPUSharingMode, error) {
	own := ForDriver(configs, driver)
	if !slices.ContainsFunc(own, func(c Config) bool { return c.Applies(request) }) {
		return defaultSharing[driver], nil
	}
	mode, _, err := Sharing(own, request)
	return mode, err
}

// Sharing reads how the configurations that apply to a request share its
// devices: TimeSlicing, MPS, or empty when none shares them. Configurations
// of drivers it does not read are returned in unread, for the policy to
// allow or refuse; one it cannot make sense of is an error.
func Sharing(configs []Config, request string) (mode v1alpha1.GPUSharingMode, unread []string, err error) {
	for _, c := range configs {
		if c.Opaque == nil || !c.Applies(request) {
			continue
		}
		kinds, known := configKinds[c.Opaque.Driver]
		if !known {
			unread = append(unread, c.Opaque.Driver)
			continue
		}
		m, err := configSharing(c.Opaque, kinds)
		if err != nil {
			return "", unread, err
		}
		if m != "" {
			mode = m
		}
	}
	return mode, unread, nil
}

func configSharing(o *resourcev1.OpaqueDeviceConfiguration, kinds map[string]bool) (v1alpha1.GPUSharingMode, error) {
	raw := o.Parameters.Raw
	if len(raw) == 0 && o.Parameters.Object != nil {
		b, err := json.Marshal(o.Parameters.Object)
		if err != nil {
			return "", fmt.Errorf("%s configuration: %w", o.Driver, err)
		}
		raw = b
	}
	// Field names are matched exactly and a field given twice is refused,
	// as the drivers' own strict decoders do: a configuration read one way
	// here and another by the driver is no configuration.
	var cfg gpuConfig
	strict, err := sigsjson.UnmarshalStrict(raw, &cfg, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return "", fmt.Errorf("%s configuration is not an object with apiVersion and kind: %w", o.Driver, err)
	}
	if len(strict) > 0 {
		return "", fmt.Errorf("%s configuration: %w", o.Driver, errors.Join(strict...))
	}
	shares, known := kinds[cfg.Kind]
	if !known {
		return "", fmt.Errorf("%s configuration of kind %q, which is not read", o.Driver, cfg.Kind)
	}
	if !shares {
		return "", nil
	}
	if cfg.Sharing == nil {
		// The example driver time-slices a GPU its configuration does not
		// say how to share.
		if o.Driver == ExampleDriver {
			return v1alpha1.SharingTimeSlicing, nil
		}
		return "", nil
	}
	m, ok := strategies[cfg.Sharing.Strategy]
	if !ok {
		return "", fmt.Errorf("%s %s: sharing strategy %q is not read", o.Driver, cfg.Kind, cfg.Sharing.Strategy)
	}
	return m, nil
}
