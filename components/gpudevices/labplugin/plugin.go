// Package labplugin is a kubelet device plugin for lab clusters: it
// advertises a fixed number of healthy devices of one extended resource
// and allocates them without touching any hardware (each allocation only
// sets an environment variable naming the device IDs). It lets a kind
// cluster schedule pods that request a GPU resource name, so the GPU
// device policies can be proven end to end. It is a lab stand-in: the
// chart never deploys it.
package labplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// EnvDevices is the variable an allocation sets to the comma-separated
// IDs of the devices it handed out.
const EnvDevices = "XILA_GUARD_LAB_DEVICES"

// Plugin serves one resource.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	// Resource is the extended resource name, e.g. example.com/gpu.
	Resource string
	// Count is how many devices the node offers.
	Count int
	// Dir is the kubelet's device-plugin directory
	// (pluginapi.DevicePluginPath by default).
	Dir string
	// Log receives what the plugin does.
	Log *slog.Logger
}

func (p *Plugin) socketName() string {
	return "xila-guard-lab-" + strings.NewReplacer("/", "-", ".", "-").Replace(p.Resource) + ".sock"
}

func (p *Plugin) devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, p.Count)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("lab-%d", i), Health: pluginapi.Healthy}
	}
	return out
}

// GetDevicePluginOptions: no pre-start hook, no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once and keeps the stream open.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate hands out the requested devices: only an environment variable.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		p.Log.Info("allocate", "resource", p.Resource, "devices", c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{EnvDevices: strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

// Run serves the plugin and registers it with the kubelet until ctx ends,
// serving and registering again whenever the kubelet restarts (it removes
// every plugin socket when it does).
func (p *Plugin) Run(ctx context.Context) error {
	if p.Count < 1 || p.Resource == "" {
		return errors.New("a resource name and a positive count are required")
	}
	if p.Dir == "" {
		p.Dir = pluginapi.DevicePluginPath
	}
	for {
		if err := p.serveOnce(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error("device plugin", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// serveOnce serves on a fresh socket, registers, and returns when the
// socket is gone (a kubelet restart) or ctx ends.
func (p *Plugin) serveOnce(ctx context.Context) error {
	sock := filepath.Join(p.Dir, p.socketName())
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	if err := p.register(ctx); err != nil {
		return fmt.Errorf("registering with the kubelet: %w", err)
	}
	p.Log.Info("registered", "resource", p.Resource, "devices", p.Count, "socket", sock)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := os.Stat(sock); err != nil {
			p.Log.Info("socket removed: the kubelet restarted; registering again", "socket", sock)
			return nil
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
		Version: pluginapi.Version, Endpoint: p.socketName(), ResourceName: p.Resource,
	})
	return err
}
