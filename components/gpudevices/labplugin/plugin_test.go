package labplugin

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubelet is the registration side of a kubelet: it records each
// registration and its endpoint.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	got chan *pluginapi.RegisterRequest
}

func (k *kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.got <- r
	return &pluginapi.Empty{}, nil
}

// TestRegisterListAllocate runs the plugin against a registration server
// on the kubelet's socket name, then lists and allocates devices through
// the endpoint it registered, and registers again after the kubelet
// removes the plugin's socket, as a restarting kubelet does.
func TestRegisterListAllocate(t *testing.T) {
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	k := &kubelet{got: make(chan *pluginapi.RegisterRequest, 4)}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &Plugin{Resource: "example.com/gpu", Count: 2, Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { _ = p.Run(ctx) }()

	var reg *pluginapi.RegisterRequest
	select {
	case reg = <-k.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
	}
	if reg.ResourceName != "example.com/gpu" || reg.Version != pluginapi.Version || reg.Endpoint == "" {
		t.Fatalf("registration %+v", reg)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, reg.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pluginapi.NewDevicePluginClient(conn)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 2 || list.Devices[0].Health != pluginapi.Healthy {
		t.Fatalf("devices %v, want 2 healthy", list.Devices)
	}
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"lab-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerResponses[0].Envs[EnvDevices]; got != "lab-1" {
		t.Errorf("allocation sets %s=%q, want lab-1", EnvDevices, got)
	}

	// A restarting kubelet removes the plugins' sockets.
	if err := os.Remove(filepath.Join(dir, reg.Endpoint)); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-k.got:
		if again.ResourceName != reg.ResourceName {
			t.Errorf("registered again as %+v", again)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register again after its socket was removed")
	}
}

func TestRunRefusesNoDevices(t *testing.T) {
	p := &Plugin{Resource: "example.com/gpu", Log: slog.Default()}
	if err := p.Run(context.Background()); err == nil {
		t.Error("a plugin with no devices runs")
	}
}
