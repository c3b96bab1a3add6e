package main

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// serve starts a one-byte echo server in the netns of c.Src: every
// connection gets each byte it sends back, and is closed by the server
// after the first exchange when the client asked for it (a byte 'c',
// connect/close mode) so that TIME_WAIT stays on this side.
func (p *prober) serve(c command) error {
	path, err := p.ns.lookup(c.Src)
	if err != nil {
		return err
	}
	lfd := make(chan int, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(path); err != nil {
			errc <- err
			return
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: c.Port}); err != nil {
			errc <- fmt.Errorf("bind :%d: %w", c.Port, err)
			return
		}
		if err := unix.Listen(fd, 1024); err != nil {
			errc <- err
			return
		}
		lfd <- fd
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return err
	}
	fd := <-lfd
	go func() {
		for {
			cfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
			if err != nil {
				if err == unix.EINTR || err == unix.ECONNABORTED {
					continue
				}
				p.out.send(event{Ev: "error", ID: c.ID, Msg: "accept: " + err.Error()})
				return
			}
			go echo(cfd)
		}
	}()
	p.out.send(event{Ev: "serving", ID: c.ID})
	return nil
}

func echo(fd int) {
	runtime.LockOSThread()
	defer unix.Close(fd)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	buf := make([]byte, 1)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		if _, err := retry(func() (int, error) { return unix.Write(fd, buf[:1]) }); err != nil {
			return
		}
		if buf[0] == 'c' {
			return
		}
	}
}

// rr runs a request/response ("rr": one connection, one byte each way, as
// many times as it can) or connect/close ("crr": connect, one byte each
// way, wait for the server's close, close) loop from the netns of c.Src
// to c.Dst for c.Duration, with blocking system calls on one thread as
// netperf does.
func (p *prober) rr(c command) error {
	d, err := time.ParseDuration(c.Duration)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	dst, err := sockaddr(c.Dst)
	if err != nil {
		return err
	}
	path, err := p.ns.lookup(c.Src)
	if err != nil {
		return err
	}
	if c.Mode != "rr" && c.Mode != "crr" {
		return fmt.Errorf("mode %q: want rr or crr", c.Mode)
	}
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(path); err != nil {
			p.out.send(event{Ev: "error", ID: c.ID, Msg: err.Error()})
			return
		}
		var n, errs int64
		var first string
		start := time.Now()
		end := start.Add(d)
		if c.Mode == "rr" {
			n, errs, first = loopRR(dst, end)
		} else {
			n, errs, first = loopCRR(dst, end)
		}
		p.out.send(event{Ev: "rr", ID: c.ID, N: n, Errors: errs, NS: int64(time.Since(start)), Msg: first})
	}()
	return nil
}

func dial(dst unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 1})
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	if err := unix.Connect(fd, dst); err == unix.EINTR {
		// The handshake goes on: wait for it.
		err = waitConnected(fd)
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
	} else if err != nil {
		unix.Close(fd)
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return fd, nil
}

func waitConnected(fd int) error {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if _, err := retry(func() (int, error) { return unix.Poll(pfd, 1000) }); err != nil {
		return err
	}
	soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soerr != 0 {
		return unix.Errno(soerr)
	}
	if pfd[0].Revents&unix.POLLOUT == 0 {
		return unix.ETIMEDOUT
	}
	return nil
}

// retry repeats a system call that a signal interrupted (the Go runtime
// signals its threads to preempt them).
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

func exchange(fd int, b byte) error {
	buf := []byte{b}
	if _, err := retry(func() (int, error) { return unix.Write(fd, buf) }); err != nil {
		return err
	}
	n, err := retry(func() (int, error) { return unix.Read(fd, buf) })
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("short read")
	}
	return nil
}

func loopRR(dst unix.Sockaddr, end time.Time) (n, errs int64, first string) {
	fd, err := dial(dst)
	if err != nil {
		return 0, 1, err.Error()
	}
	defer unix.Close(fd)
	for time.Now().Before(end) {
		if err := exchange(fd, 'r'); err != nil {
			return n, errs + 1, err.Error()
		}
		n++
	}
	return n, errs, ""
}

func loopCRR(dst unix.Sockaddr, end time.Time) (n, errs int64, first string) {
	buf := make([]byte, 1)
	for time.Now().Before(end) {
		fd, err := dial(dst)
		if err == nil {
			err = exchange(fd, 'c')
			if err == nil {
				_, err = retry(func() (int, error) { return unix.Read(fd, buf) }) // the server's close
			}
			unix.Close(fd)
		}
		if err != nil {
			if errs++; first == "" {
				first = err.Error()
			}
			continue
		}
		n++
	}
	return n, errs, first
}
