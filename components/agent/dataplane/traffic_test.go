//go:build linux

package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/agent/internal/netns"
)

// server runs in a pod: TCP listeners that greet with the pod's name and
// then echo, and UDP sockets that answer every datagram with the pod's name
// and remember who sent what.
type server struct {
	pod  *netns.Pod
	mu   sync.Mutex
	udp  map[netip.Addr]int // datagrams received per source
	seqs map[uint64]bool    // sequence numbers received on sink sockets
}

// startServer listens on tcp ports and udp ports (dual stack) inside pod.
// UDP ports below 6000 answer; 6000 and above are silent sinks.
func startServer(t testing.TB, pod *netns.Pod, tcpPorts, udpPorts []int) *server {
	t.Helper()
	s := &server{pod: pod, udp: map[netip.Addr]int{}, seqs: map[uint64]bool{}}
	err := pod.NS.Do(func() error {
		for _, port := range tcpPorts {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			t.Cleanup(func() { l.Close() })
			go s.serveTCP(l)
		}
		for _, port := range udpPorts {
			c, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			go s.serveUDP(c, port < 6000)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("starting servers in %s: %v", pod.Name, err)
	}
	return s
}

func (s *server) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "%s\n", s.pod.Name)
			io.Copy(c, c)
		}()
	}
}

func (s *server) serveUDP(c net.PacketConn, answer bool) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		src := netip.MustParseAddrPort(from.String()).Addr().Unmap()
		s.mu.Lock()
		s.udp[src]++
		var seq uint64
		if _, err := fmt.Sscanf(string(buf[:n]), "seq %d", &seq); err == nil {
			s.seqs[seq] = true
		}
		s.mu.Unlock()
		if answer {
			c.WriteTo([]byte(s.pod.Name), from)
		}
	}
}

func (s *server) received(from netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udp[from.Unmap()]
}

// dial opens a TCP connection from inside pod.
func dial(from *netns.Pod, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := from.NS.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", to.String(), timeout)
		return err
	})
	return c, err
}

// echoer reads the server's greeting from conn, which must name want,
// and returns a function that sends one numbered line and waits for that
// same line back. A reply left buffered from an earlier round, or the
// greeting, cannot pass for the answer to a later one.
func echoer(t *testing.T, conn net.Conn, want string, timeout time.Duration) func() error {
	t.Helper()
	r := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if hello, err := r.ReadString('\n'); err != nil || hello != want+"\n" {
		t.Fatalf("greeting: %q, %v; want %q", hello, err, want)
	}
	seq := 0
	return func() error {
		seq++
		token := fmt.Sprintf("echo %d\n", seq)
		conn.SetDeadline(time.Now().Add(timeout))
		if _, err := io.WriteString(conn, token); err != nil {
			return err
		}
		got, err := r.ReadString('\n')
		if err == nil && got != token {
			return fmt.Errorf("echo answered %q, want %q", got, token)
		}
		return err
	}
}

// tcpHello connects and returns the name the server greets with.
func tcpHello(from *netns.Pod, to netip.AddrPort) (string, error) {
	c, err := dial(from, to, 400*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// udpHello sends one datagram and returns the answer, trying a few times
// because the first packet may wait for neighbour resolution.
func udpHello(from *netns.Pod, to netip.AddrPort) (string, error) {
	var c net.Conn
	if err := from.NS.Do(func() (err error) {
		c, err = net.Dial("udp", to.String())
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 256)
	for range 3 {
		c.Write([]byte("hello"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(buf); err == nil {
			return string(buf[:n]), nil
		}
	}
	return "", errors.New("no answer")
}

// probe is one expected reachability fact.
type probe struct {
	name     string
	from     *netns.Pod
	to       netip.AddrPort
	udp      bool
	wantFrom string // the answering pod's name, or "" for no answer
}

func checkProbes(t *testing.T, probes []probe) {
	t.Helper()
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			hello := tcpHello
			if p.udp {
				hello = udpHello
			}
			got, err := hello(p.from, p.to)
			switch {
			case p.wantFrom == "" && err == nil:
				t.Fatalf("%s -> %s answered by %q, want no connection", p.from.Name, p.to, got)
			case p.wantFrom != "" && err != nil:
				t.Fatalf("%s -> %s: %v, want an answer from %s", p.from.Name, p.to, err, p.wantFrom)
			case got != p.wantFrom:
				t.Fatalf("%s -> %s answered by %q, want %q", p.from.Name, p.to, got, p.wantFrom)
			}
		})
	}
}

func ap(a netip.Addr, port int) netip.AddrPort { return netip.AddrPortFrom(a, uint16(port)) }
