package teeresources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Defaults of the enclave device plugin.
const (
	// DefaultEnclaveLimit is how many containers of a node may hold the
	// enclave device at once: Intel's SGX device plugin's default.
	DefaultEnclaveLimit = 20
	// MaxEnclaveLimit bounds --enclave-limit: the kubelet keeps every
	// device in memory and in its checkpoint.
	MaxEnclaveLimit = 10000
	// EnclaveDevice is the SGX enclave device of the in-kernel driver, on
	// the host and in the container.
	EnclaveDevice = "/dev/sgx_enclave"
	// LabDevice is what a lab allocation maps to EnclaveDevice: a device
	// every node has and that does nothing.
	LabDevice = "/dev/null"
	// SocketName is the plugin's socket in the kubelet's device-plugin
	// directory.
	SocketName = "xila-guard-sgx-enclave.sock"
)

// pollInterval is how often the plugin checks that its socket is still
// there: the kubelet removes every plugin's socket when it starts, and
// the plugin registers again as soon as it sees its socket gone.
const pollInterval = 100 * time.Millisecond

// maxRetry bounds the wait between failed registrations: a restarting
// kubelet takes a moment to listen again, and the plugin should be among
// the first to register.
const maxRetry = 500 * time.Millisecond

// Plugin is the kubelet device plugin of sgx.intel.com/enclave: Count
// devices, all healthy or all unhealthy (SetHealthy), each allocation
// handing the container the enclave device. It serves on a socket in the
// kubelet's device-plugin directory and registers with the kubelet, and
// does so again whenever the kubelet restarts.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	// Count is how many enclave devices the node offers.
	Count int
	// Dir is the kubelet's device-plugin directory
	// (pluginapi.DevicePluginPath when empty).
	Dir string
	// Lab maps LabDevice to the container's EnclaveDevice instead of the
	// host's own, for nodes without SGX.
	Lab bool
	// DevDir is where the host's /dev is seen, to tell whether the host
	// has EnclaveDevice; /dev when empty.
	DevDir string
	// Log receives what the plugin does; nil discards.
	Log *slog.Logger
	// Registered, when set, is called after every registration with the
	// kubelet, the first and those after a kubelet restart.
	Registered func()

	mu       sync.Mutex
	healthy  bool
	watchers map[chan struct{}]struct{}
}

// Resource is the extended resource the plugin serves.
func (p *Plugin) Resource() string { return string(ResourceEnclave) }

// DeviceAvailable says whether an allocation can hand out an enclave
// device: always in the lab, otherwise when the host has EnclaveDevice.
func (p *Plugin) DeviceAvailable() bool {
	if p.Lab {
		return true
	}
	dir := p.DevDir
	if dir == "" {
		dir = "/dev"
	}
	fi, err := os.Stat(filepath.Join(dir, filepath.Base(EnclaveDevice)))
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// SetHealthy sets the health of every device and, when it changed, sends
// the new list to the kubelet. It says whether it changed.
func (p *Plugin) SetHealthy(healthy bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healthy == healthy {
		return false
	}
	p.healthy = healthy
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}

// Healthy says whether the devices are healthy.
func (p *Plugin) Healthy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthy
}

func (p *Plugin) devices() []*pluginapi.Device {
	health := pluginapi.Unhealthy
	if p.Healthy() {
		health = pluginapi.Healthy
	}
	out := make([]*pluginapi.Device, p.Count)
	for i := range out {
		out[i] = &pluginapi.Device{ID: deviceID(i), Health: health}
	}
	return out
}

func deviceID(i int) string { return fmt.Sprintf("sgx-enclave-%d", i) }

func (p *Plugin) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// GetDevicePluginOptions: no pre-start hook, no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices, and again whenever their health
// changes, until the kubelet closes the stream.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	if p.watchers == nil {
		p.watchers = map[chan struct{}]struct{}{}
	}
	p.watchers[ch] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	}()
	for {
		devs := p.devices()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		p.log().Info("devices sent to the kubelet", "resource", p.Resource(), "devices", len(devs), "health", devs[0].Health)
		select {
		case <-s.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// Allocate hands each container the enclave device, once whatever the
// number of enclave devices it asked for: the device IDs are slots, not
// hardware. It refuses while the devices are unhealthy (the evidence
// stopped qualifying after the pod was scheduled), for an unknown device
// ID, and when the host has no enclave device.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	if !p.Healthy() {
		return nil, errors.New("the node's evidence does not qualify for SGX enclaves")
	}
	host := EnclaveDevice
	if p.Lab {
		host = LabDevice
	} else if !p.DeviceAvailable() {
		return nil, fmt.Errorf("the host has no %s", EnclaveDevice)
	}
	known := make([]string, p.Count)
	for i := range known {
		known[i] = deviceID(i)
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !slices.Contains(known, id) {
				return nil, fmt.Errorf("no such device %q", id)
			}
		}
		p.log().Info("allocate", "resource", p.Resource(), "devices", c.DevicesIds, "hostPath", host)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: EnclaveDevice, HostPath: host, Permissions: "rw"}},
		})
	}
	return resp, nil
}

// Run serves the plugin and registers it with the kubelet until ctx ends,
// serving and registering again whenever the kubelet restarts.
func (p *Plugin) Run(ctx context.Context) error {
	if p.Count < 1 || p.Count > MaxEnclaveLimit {
		return fmt.Errorf("the enclave device count %d is not within 1 to %d", p.Count, MaxEnclaveLimit)
	}
	if p.Dir == "" {
		p.Dir = pluginapi.DevicePluginPath
	}
	retry := pollInterval
	for {
		registered, err := p.serveOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log().Warn("device plugin", "err", err.Error(), "retry", retry.String())
		}
		if registered {
			retry = pollInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		if !registered {
			retry = min(2*retry, maxRetry)
		}
	}
}

// serveOnce serves on a fresh socket, registers, and returns when the
// socket is gone (a kubelet restart) or ctx ends. It says whether it
// registered.
func (p *Plugin) serveOnce(ctx context.Context) (bool, error) {
	sock := filepath.Join(p.Dir, SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return false, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	start := time.Now()
	if err := p.register(ctx); err != nil {
		return false, fmt.Errorf("registering with the kubelet: %w", err)
	}
	p.log().Info("registered with the kubelet", "resource", p.Resource(), "devices", p.Count, "socket", sock,
		"lab", p.Lab, "took", time.Since(start).String())
	if p.Registered != nil {
		p.Registered()
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-t.C:
		}
		if _, err := os.Stat(sock); err != nil {
			p.log().Info("socket removed: the kubelet restarted; registering again", "socket", sock)
			return true, nil
		}
	}
}

func (p *Plugin) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.Dir, filepath.Base(pluginapi.KubeletSocket)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: SocketName, ResourceName: p.Resource(),
	})
	return err
}
