package teeresources

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubelet is the registration side of a kubelet on a device-plugin
// directory: it records each registration.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir string
	got chan *pluginapi.RegisterRequest
	srv *grpc.Server
}

func (k *kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.got <- r
	return &pluginapi.Empty{}, nil
}

// start listens on kubelet.sock, as a starting kubelet does.
func (k *kubelet) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(k.dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go func() { _ = srv.Serve(l) }()
	k.srv = srv
}

// restart stops the kubelet and starts it again as a kubelet does: it
// removes every socket of the directory, its own included, and listens
// anew.
func (k *kubelet) restart(t *testing.T) {
	t.Helper()
	k.srv.Stop()
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		_ = os.Remove(filepath.Join(k.dir, e.Name()))
	}
	k.start(t)
}

func (k *kubelet) wait(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
		return nil
	}
}

func newKubelet(t *testing.T) *kubelet {
	t.Helper()
	// Unix socket paths are short: t.TempDir can be too long.
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &kubelet{dir: dir, got: make(chan *pluginapi.RegisterRequest, 8)}
	k.start(t)
	t.Cleanup(func() { k.srv.Stop() })
	return k
}

func dial(t *testing.T, dir, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func recvDevices(t *testing.T, s pluginapi.DevicePlugin_ListAndWatchClient) []*pluginapi.Device {
	t.Helper()
	got := make(chan *pluginapi.ListAndWatchResponse, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := s.Recv()
		if err != nil {
			errs <- err
			return
		}
		got <- r
	}()
	select {
	case r := <-got:
		return r.Devices
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no device list")
	}
	return nil
}

func wantHealth(t *testing.T, devs []*pluginapi.Device, n int, health string) {
	t.Helper()
	if len(devs) != n {
		t.Fatalf("%d devices, want %d", len(devs), n)
	}
	for _, d := range devs {
		if d.Health != health {
			t.Fatalf("device %s is %s, want %s", d.ID, d.Health, health)
		}
	}
}

// TestPluginRegistersListsAndReregisters runs the plugin against a
// registration server on the kubelet's socket, follows its devices'
// health through ListAndWatch, and registers it again after a kubelet
// restart.
func TestPluginRegistersListsAndReregisters(t *testing.T) {
	k := newKubelet(t)
	registered := make(chan struct{}, 8)
	p := &Plugin{Count: 3, Dir: k.dir, Lab: true, Registered: func() { registered <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	reg := k.wait(t)
	if reg.ResourceName != string(ResourceEnclave) || reg.Version != pluginapi.Version || reg.Endpoint != SocketName {
		t.Fatalf("registration %+v", reg)
	}
	<-registered
	c := dial(t, k.dir, reg.Endpoint)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	wantHealth(t, recvDevices(t, stream), 3, pluginapi.Unhealthy)
	if !p.SetHealthy(true) || p.SetHealthy(true) {
		t.Error("SetHealthy does not say when the health changed")
	}
	wantHealth(t, recvDevices(t, stream), 3, pluginapi.Healthy)
	p.SetHealthy(false)
	wantHealth(t, recvDevices(t, stream), 3, pluginapi.Unhealthy)

	start := time.Now()
	k.restart(t)
	if again := k.wait(t); again.ResourceName != reg.ResourceName || again.Endpoint != SocketName {
		t.Errorf("registered again as %+v", again)
	}
	<-registered
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("registered again %s after the kubelet restarted", d)
	}
	// The kubelet's new stream sees the current health.
	p.SetHealthy(true)
	stream, err = dial(t, k.dir, SocketName).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	wantHealth(t, recvDevices(t, stream), 3, pluginapi.Healthy)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestPluginRegistersOnceTheKubeletListens(t *testing.T) {
	k := newKubelet(t)
	k.srv.Stop()
	_ = os.Remove(filepath.Join(k.dir, "kubelet.sock"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = (&Plugin{Count: 1, Dir: k.dir, Lab: true}).Run(ctx) }()
	time.Sleep(300 * time.Millisecond)
	k.start(t)
	k.wait(t)
}

func TestAllocate(t *testing.T) {
	// A host with the enclave device: a DevDir whose sgx_enclave is a
	// character device.
	devDir := t.TempDir()
	if err := os.Symlink("/dev/null", filepath.Join(devDir, "sgx_enclave")); err != nil {
		t.Fatal(err)
	}
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"sgx-enclave-0"}}, {DevicesIds: []string{"sgx-enclave-1", "sgx-enclave-2"}}}}
	for _, tc := range []struct {
		name     string
		p        *Plugin
		healthy  bool
		req      *pluginapi.AllocateRequest
		hostPath string
		err      string
	}{
		{name: "lab", p: &Plugin{Count: 3, Lab: true, DevDir: t.TempDir()}, healthy: true, req: req, hostPath: LabDevice},
		{name: "real", p: &Plugin{Count: 3, DevDir: devDir}, healthy: true, req: req, hostPath: EnclaveDevice},
		{name: "real without the device", p: &Plugin{Count: 3, DevDir: t.TempDir()}, healthy: true, req: req, err: "the host has no /dev/sgx_enclave"},
		{name: "a directory is no device", p: &Plugin{Count: 3, DevDir: filepath.Dir(devDir)}, healthy: true, req: req, err: "the host has no"},
		{name: "unhealthy", p: &Plugin{Count: 3, Lab: true}, req: req, err: "does not qualify"},
		{name: "unknown device", p: &Plugin{Count: 1, Lab: true}, healthy: true, req: req, err: `no such device "sgx-enclave-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.SetHealthy(tc.healthy)
			resp, err := tc.p.Allocate(context.Background(), tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Allocate: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ContainerResponses) != 2 {
				t.Fatalf("%d container responses, want 2", len(resp.ContainerResponses))
			}
			for i, c := range resp.ContainerResponses {
				if len(c.Devices) != 1 || c.Devices[0].ContainerPath != EnclaveDevice || c.Devices[0].HostPath != tc.hostPath ||
					c.Devices[0].Permissions != "rw" {
					t.Errorf("container %d: devices %v, want %s as %s, rw", i, c.Devices, tc.hostPath, EnclaveDevice)
				}
			}
		})
	}
}

func TestPluginRefusesBadCounts(t *testing.T) {
	for _, n := range []int{0, -1, MaxEnclaveLimit + 1} {
		if err := (&Plugin{Count: n}).Run(context.Background()); err == nil {
			t.Errorf("a plugin with %d devices runs", n)
		}
	}
}
