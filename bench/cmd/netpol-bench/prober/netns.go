package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// netnsDirs are where containerd (through the CNI) keeps pod network
// namespaces on a kind node.
var netnsDirs = []string{"/var/run/netns", "/run/netns"}

// namespaces maps pod IPs to the network namespace that holds them,
// scanning the node's namespaces again when an address is not known.
type namespaces struct {
	mu      sync.Mutex
	byIP    map[string]string   // pod IP -> netns path
	scanned map[string][]string // netns path -> its addresses
}

func newNamespaces() *namespaces {
	return &namespaces{byIP: map[string]string{}, scanned: map[string][]string{}}
}

// lookup returns the netns path that has ip on one of its interfaces.
func (n *namespaces) lookup(ip string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.byIP[ip]; ok {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	n.rescan()
	if p, ok := n.byIP[ip]; ok {
		return p, nil
	}
	return "", fmt.Errorf("no network namespace on this node has %s", ip)
}

// rescan reads the addresses of namespaces not seen before and forgets
// namespaces that are gone.
func (n *namespaces) rescan() {
	present := map[string]bool{}
	for _, dir := range netnsDirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			real, err := filepath.EvalSymlinks(p)
			if err != nil || present[real] {
				continue
			}
			present[real] = true
			if _, ok := n.scanned[real]; ok {
				continue
			}
			addrs, err := addressesIn(real)
			if err != nil {
				continue
			}
			n.scanned[real] = addrs
		}
	}
	for p := range n.scanned {
		if !present[p] {
			delete(n.scanned, p)
		}
	}
	clear(n.byIP)
	for p, addrs := range n.scanned {
		for _, a := range addrs {
			n.byIP[a] = p
		}
	}
}

// addressesIn lists the IP addresses of a network namespace's interfaces.
func addressesIn(path string) ([]string, error) {
	var addrs []string
	err := inNetns(path, func() error {
		ifaddrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range ifaddrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				addrs = append(addrs, ipn.IP.String())
			}
		}
		return nil
	})
	return addrs, err
}

// inNetns runs f on a thread of its own inside the network namespace at
// path. The thread stays locked, so it ends with the goroutine and never
// runs other code in the wrong namespace.
func inNetns(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(path); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// enterNetns moves the calling (locked) thread into a network namespace.
func enterNetns(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening netns %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering netns %s: %w", path, err)
	}
	return nil
}

// socketFactory is a thread inside one network namespace that creates
// non-blocking TCP sockets ahead of use. A socket belongs to the namespace
// it was created in, whichever thread connects it later.
type socketFactory struct {
	fds  chan int
	stop chan struct{}
	refs int
}

func startFactory(path string) (*socketFactory, error) {
	f := &socketFactory{fds: make(chan int, 32), stop: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(path); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				fd = -1
			}
			select {
			case f.fds <- fd:
			case <-f.stop:
				if fd >= 0 {
					unix.Close(fd)
				}
				for {
					select {
					case fd := <-f.fds:
						if fd >= 0 {
							unix.Close(fd)
						}
					default:
						return
					}
				}
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return f, nil
}
