//go:build linux

package dataplane

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// TestPolicySwapUnderTraffic switches a pod's ingress policy back and forth
// between two differently built rule sets that both allow a and deny c,
// while a streams TCP and UDP to it and c keeps trying. No packet of a may
// be dropped and no packet of c may pass, at any moment of any switch.
func TestPolicySwapUnderTraffic(t *testing.T) {
	node := netns.NewNode(t, 3)
	a, b, c := node.Pods[0], node.Pods[1], node.Pods[2]
	srv := startServer(t, b, []int{8080}, []int{6000})
	d := openIn(t, node.NS, Config{PinPath: bpffs(t)})

	// p1 names a exactly; p2 reaches it through CIDRs with c cut out and
	// wider port ranges. Both allow exactly the same of a's traffic.
	p1 := ruleSet(
		a.V4.String()+"/32", ports(rules.TCP, 8080, 8080).union(ports(rules.UDP, 6000, 6000)),
		a.V6.String()+"/128", ports(rules.TCP, 8080, 8080).union(ports(rules.UDP, 6000, 6000)))
	var bld rules.Builder
	bld.AddExcept(prefix("10.200.0.0/24"), []netip.Prefix{netip.PrefixFrom(c.V4, 32)},
		ports(rules.TCP, 8000, 8100).union(ports(rules.UDP, 6000, 6001)))
	bld.AddExcept(prefix("fd00:200::/64"), []netip.Prefix{netip.PrefixFrom(c.V6, 128)},
		ports(rules.TCP, 8000, 8100).union(ports(rules.UDP, 6000, 6001)))
	p2 := bld.Build(true)

	for _, p := range []*netns.Pod{a, c} {
		mustApplyIn(t, node.NS, d, endpointOf(p), rules.AllowAll, rules.AllowAll)
	}
	mustApplyIn(t, node.NS, d, endpointOf(b), p1, rules.AllowAll)

	conn, err := dial(a, ap(b.V4, 8080), time.Second)
	if err != nil {
		t.Fatalf("a cannot reach b before the test: %v", err)
	}
	defer conn.Close()
	aUDP, cUDP := udpSender(t, a, ap(b.V4, 6000), ap(b.V6, 6000)), udpSender(t, c, ap(b.V4, 6000), ap(b.V6, 6000))
	// Resolve every neighbour first: a datagram queued behind neighbour
	// discovery can be lost, and that would not be the policy's doing.
	for _, s := range append(aUDP, cUDP...) {
		s.Write([]byte("warm up"))
	}
	time.Sleep(300 * time.Millisecond)
	srv.mu.Lock()
	clear(srv.udp)
	srv.mu.Unlock()
	before, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}

	var (
		stop                  = make(chan struct{})
		wg                    sync.WaitGroup
		aSent, cSent, rounds  atomic.Int64
		streamErr, cConnected atomic.Value
		tick                  = time.Millisecond
		cDialTimeout          = 150 * time.Millisecond // below the SYN retransmission timeout: one SYN per try
	)
	wg.Add(3)
	go func() { // a: TCP echo round trips on one long connection
		defer wg.Done()
		buf := make([]byte, 1024)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write(buf); err != nil {
				streamErr.Store(err)
				return
			}
			if _, err := io.ReadFull(conn, buf); err != nil {
				streamErr.Store(err)
				return
			}
			rounds.Add(1)
		}
	}()
	go func() { // a and c: UDP datagrams with sequence numbers, both families
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(tick):
			}
			aUDP[i%2].Write(fmt.Appendf(nil, "seq %d", i))
			aSent.Add(1)
			cUDP[i%2].Write(fmt.Appendf(nil, "from c %d", i))
			cSent.Add(1)
		}
	}()
	go func() { // c: new TCP connections
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c, err := dial(c, ap(b.V4, 8080), cDialTimeout); err == nil {
				c.Close()
				cConnected.Store(true)
			}
			cSent.Add(1)
		}
	}()

	swaps := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); swaps++ {
		next := p1
		if swaps%2 == 0 {
			next = p2
		}
		mustApplyIn(t, node.NS, d, endpointOf(b), next, rules.AllowAll)
	}
	close(stop)
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // let the last datagrams land

	after, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d swaps, %d TCP round trips, %d datagrams from a, %d packets from c", swaps, rounds.Load(), aSent.Load(), cSent.Load())
	if swaps < 20 {
		t.Fatalf("only %d swaps happened", swaps)
	}
	if err := streamErr.Load(); err != nil {
		t.Fatalf("a's TCP stream broke: %v", err)
	}
	if cConnected.Load() != nil {
		t.Fatal("c connected to b")
	}
	if n := srv.received(c.V4) + srv.received(c.V6); n != 0 {
		t.Fatalf("b received %d datagrams from c", n)
	}
	srv.mu.Lock()
	missing := 0
	for i := range int(aSent.Load()) {
		if !srv.seqs[uint64(i)] {
			missing++
		}
	}
	srv.mu.Unlock()
	if missing > 0 {
		t.Fatalf("%d of a's %d datagrams did not arrive", missing, aSent.Load())
	}
	// Every drop is one of c's packets: none of a's was dropped, not even
	// a TCP segment that a retransmission would have hidden.
	if denied := after.Denied - before.Denied; denied != uint64(cSent.Load()) {
		t.Fatalf("%d packets denied, c sent %d", denied, cSent.Load())
	}
	if after.Malformed != before.Malformed {
		t.Fatalf("%d malformed packets", after.Malformed-before.Malformed)
	}
	if n := d.generationCount(); n != 1 {
		t.Fatalf("%d generations in the maps after the swaps, want 1", n)
	}
}

// udpSender returns connected UDP sockets inside pod, one per target.
func udpSender(t *testing.T, pod *netns.Pod, targets ...netip.AddrPort) []net.Conn {
	t.Helper()
	var out []net.Conn
	err := pod.NS.Do(func() error {
		for _, to := range targets {
			c, err := net.Dial("udp", to.String())
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("udp sockets in %s: %v", pod.Name, err)
	}
	return out
}
