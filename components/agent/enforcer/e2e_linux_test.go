package enforcer

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	fx "github.com/xila-guard/xila-guard/components/agent/internal/fixture"
	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
)

// TestPoliciesToPackets runs the whole path on the kernel: NetworkPolicy
// objects, the compiler, Sync, and real connections between namespaces.
func TestPoliciesToPackets(t *testing.T) {
	if err := features.HaveProgramType(ebpf.Netfilter); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks netfilter BPF programs: %v", err)
	}
	node := netns.NewNode(t, 3)
	names := []string{"client", "server", "other"}
	var pods []*corev1.Pod
	var local []Pod
	for i, p := range node.Pods {
		pods = append(pods, fx.MakePod("x", names[i]).Label("app", names[i]).
			IPs(p.V4.String(), p.V6.String()).Port("http", corev1.ProtocolTCP, 8080).Obj())
		local = append(local, Pod{Key: types.NamespacedName{Namespace: "x", Name: names[i]},
			Endpoint: dataplane.Endpoint{Ifindex: p.Ifindex, Addrs: p.Addrs()}})
	}
	server := node.Pods[1]
	if err := server.NS.Do(func() error {
		l, err := net.Listen("tcp", ":8080")
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "server")
				c.Close()
			}
		}()
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	pin := t.TempDir()
	if err := unix.Mount("bpf", pin, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(pin, unix.MNT_DETACH) })
	var dp *dataplane.Dataplane
	if err := node.NS.Do(func() (err error) {
		dp, err = dataplane.Open(dataplane.Config{PinPath: pin + "/xg"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	e := New(dp)

	sync := func(policies ...*networkingv1.NetworkPolicy) {
		t.Helper()
		c := compiler.New(compiler.Input{Pods: pods, Namespaces: []*corev1.Namespace{fx.Namespace("x")}, NetworkPolicies: policies}, compiler.Options{})
		want := map[types.NamespacedName]compiler.PodRules{}
		for _, r := range c.All() {
			want[r.Pod] = r
		}
		if err := node.NS.Do(func() error {
			out, err := e.Sync(local, want, nil, nil)
			for _, o := range out {
				if o.Err != nil {
					return o.Err
				}
			}
			return err
		}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	reach := func(from int, to netip.Addr) bool {
		var c net.Conn
		err := node.Pods[from].NS.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(to, 8080).String(), 400*time.Millisecond)
			return err
		})
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && strings.TrimSpace(line) == "server"
	}

	sync()
	if !reach(0, server.V4) || !reach(2, server.V4) {
		t.Fatal("without policies everyone reaches the server")
	}
	sync(fx.MakePolicy("x", "server").Select("app", "server").
		Ingress(fx.Peers(fx.PodPeer(fx.Labels("app", "client"))), fx.NamedPort(corev1.ProtocolTCP, "http")).Obj())
	for _, tc := range []struct {
		name string
		from int
		to   netip.Addr
		want bool
	}{
		{"client v4", 0, server.V4, true},
		{"client v6", 0, server.V6, true},
		{"other v4", 2, server.V4, false},
		{"other v6", 2, server.V6, false},
	} {
		if got := reach(tc.from, tc.to); got != tc.want {
			t.Errorf("%s: reached = %v, want %v", tc.name, got, tc.want)
		}
	}
	sync()
	if !reach(2, server.V4) {
		t.Fatal("after the policy is deleted, other reaches the server again")
	}
}
