package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// prober owns the streams, echo servers and socket factories of one node.
type prober struct {
	out       *output
	ns        *namespaces
	mu        sync.Mutex
	factories map[string]*socketFactory // by netns path
	streams   map[string]*stream
}

func newProber(out *output) *prober {
	return &prober{out: out, ns: newNamespaces(), factories: map[string]*socketFactory{}, streams: map[string]*stream{}}
}

func (p *prober) handle(c command) error {
	switch c.Op {
	case "stream":
		return p.startStream(c)
	case "stop":
		p.mu.Lock()
		s := p.streams[c.ID]
		delete(p.streams, c.ID)
		p.mu.Unlock()
		if s == nil {
			return fmt.Errorf("no stream %q", c.ID)
		}
		go s.stop()
		return nil
	case "serve":
		return p.serve(c)
	case "rr":
		return p.rr(c)
	case "cpu":
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		p.out.send(event{Ev: "cpu", ID: c.ID, NS: ru.Utime.Nano() + ru.Stime.Nano()})
		return nil
	}
	return fmt.Errorf("unknown op %q", c.Op)
}

// factory returns the socket factory of the netns holding ip, starting it
// when needed, with one more reference.
func (p *prober) factory(ip string) (*socketFactory, string, error) {
	path, err := p.ns.lookup(ip)
	if err != nil {
		return nil, "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.factories[path]
	if f == nil {
		if f, err = startFactory(path); err != nil {
			return nil, "", err
		}
		p.factories[path] = f
	}
	f.refs++
	return f, path, nil
}

func (p *prober) release(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.factories[path]; f != nil {
		if f.refs--; f.refs == 0 {
			close(f.stop)
			delete(p.factories, path)
		}
	}
}

// stream probes one destination from one source netns on a fixed schedule.
type stream struct {
	id        string
	p         *prober
	path      string
	f         *socketFactory
	dst       unix.Sockaddr
	every     time.Duration
	timeout   time.Duration
	done      chan struct{}
	ran       chan struct{} // closed when run has returned
	inflight  sync.WaitGroup
	results   chan result
	emitterWG sync.WaitGroup
}

type result struct {
	seq   int64
	start time.Time
	v     string
}

func (p *prober) startStream(c command) error {
	every, err := time.ParseDuration(c.Every)
	if err != nil {
		return fmt.Errorf("every: %w", err)
	}
	timeout, err := time.ParseDuration(c.Timeout)
	if err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	dst, err := sockaddr(c.Dst)
	if err != nil {
		return err
	}
	p.mu.Lock()
	_, dup := p.streams[c.ID]
	p.mu.Unlock()
	if dup {
		return fmt.Errorf("stream %q already runs", c.ID)
	}
	f, path, err := p.factory(c.Src)
	if err != nil {
		return err
	}
	s := &stream{id: c.ID, p: p, path: path, f: f, dst: dst, every: every, timeout: timeout,
		done: make(chan struct{}), ran: make(chan struct{}), results: make(chan result, 1024)}
	p.mu.Lock()
	p.streams[c.ID] = s
	p.mu.Unlock()
	s.emitterWG.Add(1)
	go s.emit()
	go s.run()
	return nil
}

func sockaddr(hostport string) (unix.Sockaddr, error) {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("destination %q: want IPv4 address:port", hostport)
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, nil
}

// run starts one probe per tick until the stream is stopped.
func (s *stream) run() {
	defer close(s.ran)
	t := time.NewTicker(s.every)
	defer t.Stop()
	var seq int64
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		var fd int
		select {
		case <-s.done:
			return
		case fd = <-s.f.fds:
		}
		seq++
		start := time.Now()
		s.inflight.Add(1)
		go func(seq int64) {
			defer s.inflight.Done()
			// A Sockaddr of its own: Connect writes into it.
			dst := *s.dst.(*unix.SockaddrInet4)
			s.results <- result{seq: seq, start: start, v: connectOnce(fd, &dst, start.Add(s.timeout))}
		}(seq)
	}
}

// emit puts results back in the order the probes started and reports
// each change of verdict.
func (s *stream) emit() {
	defer s.emitterWG.Done()
	pending := map[int64]result{}
	next, last := int64(1), ""
	counts := map[string]int{}
	for r := range s.results {
		pending[r.seq] = r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			class := r.v
			if len(class) > 5 && class[:5] == "error" {
				class = "error"
			}
			counts[class]++
			if r.v != last {
				last = r.v
				s.p.out.send(event{Ev: "verdict", ID: s.id, Seq: r.seq, T: r.start.UnixNano(), V: r.v})
			}
		}
	}
	s.p.out.send(event{Ev: "stopped", ID: s.id, Counts: counts})
}

func (s *stream) stop() {
	close(s.done)
	<-s.ran // no probe starts after this
	s.inflight.Wait()
	close(s.results)
	s.emitterWG.Wait()
	s.p.release(s.path)
}

// connectOnce connects a non-blocking socket and closes it with a reset
// (SO_LINGER 0: no TIME_WAIT left behind at hundreds of probes a second).
func connectOnce(fd int, dst unix.Sockaddr, deadline time.Time) string {
	if fd < 0 {
		return "error: no socket"
	}
	err := unix.Connect(fd, dst)
	switch {
	case err == nil:
		return closeReset(fd, "allow")
	case errors.Is(err, unix.ECONNREFUSED):
		unix.Close(fd)
		return "allow"
	case !errors.Is(err, unix.EINPROGRESS):
		unix.Close(fd)
		return "error: " + err.Error()
	}
	file := os.NewFile(uintptr(fd), "probe")
	defer file.Close()
	rc, err := file.SyscallConn()
	if err != nil {
		return "error: " + err.Error()
	}
	file.SetWriteDeadline(deadline)
	verdict := ""
	werr := rc.Write(func(fd uintptr) bool {
		soerr, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			verdict = "error: " + err.Error()
		case soerr == 0:
			if _, err := unix.Getpeername(int(fd)); err != nil {
				return false // still connecting: wait for writability
			}
			unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			verdict = "allow"
		case syscall.Errno(soerr) == unix.ECONNREFUSED:
			verdict = "allow"
		default:
			verdict = "error: " + syscall.Errno(soerr).Error()
		}
		return true
	})
	if werr != nil {
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			return "deny"
		}
		return "error: " + werr.Error()
	}
	return verdict
}

func closeReset(fd int, v string) string {
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
	return v
}
