// Command xg-probe opens connections from inside pods' network namespaces,
// for the NetworkPolicy conformance suite. It runs on a node (copied there
// by the suite), reads a JSON list of probes on stdin — each with the
// source pod's network namespace path, a protocol, a host (an address, or
// a name resolved through the cluster DNS server from the node) and a
// port — runs them all at once, and writes one JSON result per probe.
//
// A TCP probe succeeds when the connection is established; a UDP probe
// when the agnhost netexec server answers "hostname" within the timeout.
//
// A probe that times out while xg-probe itself was starved of CPU (a
// ticker that fell behind by --stall or more) says nothing about the
// network: such probes are run once more, and the output records the
// longest stall seen and which probes were repeated. A denied connection
// times out on both attempts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Probe is one connection attempt.
type Probe struct {
	ID       int    `json:"id"`
	NetNS    string `json:"netns"`
	Protocol string `json:"protocol"` // tcp or udp
	Host     string `json:"host"`
	Port     int    `json:"port"`
}

// Result is the outcome of one probe.
type Result struct {
	ID        int    `json:"id"`
	Connected bool   `json:"connected"`
	Reply     string `json:"reply,omitempty"`
	Error     string `json:"error,omitempty"`
	Retried   bool   `json:"retried,omitempty"`
}

// Output is what xg-probe writes.
type Output struct {
	// MaxStall is the longest a 10 ms ticker fell behind during the run.
	MaxStall time.Duration `json:"maxStall"`
	Results  []Result      `json:"results"`
}

func main() {
	timeout := flag.Duration("timeout", time.Second, "per-probe timeout")
	dns := flag.String("dns", "10.96.0.10:53", "cluster DNS server for names, queried from the node")
	stallLimit := flag.Duration("stall", 200*time.Millisecond, "a ticker delay from which timed-out probes are run again")
	flag.Parse()
	var probes []Probe
	if err := json.NewDecoder(os.Stdin).Decode(&probes); err != nil {
		fmt.Fprintln(os.Stderr, "xg-probe: reading probes:", err)
		os.Exit(2)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, *dns)
	}}
	// Resolve every name once, in the node's network namespace, so that
	// name lookups do not depend on the pods' egress policy.
	addrs := map[string]string{}
	for _, p := range probes {
		if net.ParseIP(p.Host) != nil || addrs[p.Host] != "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := resolver.LookupHost(ctx, p.Host)
		cancel()
		if err != nil || len(ips) == 0 {
			fmt.Fprintf(os.Stderr, "xg-probe: resolving %s: %v\n", p.Host, err)
			os.Exit(2)
		}
		addrs[p.Host] = ips[0]
	}
	hosts := make([]string, len(probes))
	for i, p := range probes {
		host := p.Host
		if a := addrs[host]; a != "" {
			host = a
		}
		hosts[i] = net.JoinHostPort(host, strconv.Itoa(p.Port))
	}
	stall := watchStalls()
	results := make([]Result, len(probes))
	all := make([]int, len(probes))
	for i := range all {
		all[i] = i
	}
	runAll(probes, hosts, all, results, *timeout)
	if stall() >= *stallLimit {
		var again []int
		for i, r := range results {
			if !r.Connected && isTimeout(r.Error) {
				again = append(again, i)
			}
		}
		runAll(probes, hosts, again, results, *timeout)
		for _, i := range again {
			results[i].Retried = true
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(Output{MaxStall: stall(), Results: results}); err != nil {
		os.Exit(2)
	}
}

// runAll runs the probes at indexes which, all at once.
func runAll(probes []Probe, hosts []string, which []int, results []Result, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, i := range which {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = run(probes[i], hosts[i], timeout)
		}()
	}
	wg.Wait()
}

func isTimeout(msg string) bool {
	return strings.Contains(msg, "i/o timeout")
}

// watchStalls starts a 10 ms ticker and returns a function that reports
// the longest the ticker has fallen behind so far.
func watchStalls() func() time.Duration {
	const period = 10 * time.Millisecond
	var mu sync.Mutex
	var worst time.Duration
	go func() {
		last := time.Now()
		for range time.Tick(period) {
			now := time.Now()
			mu.Lock()
			worst = max(worst, now.Sub(last)-period)
			mu.Unlock()
			last = now
		}
	}()
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return worst
	}
}

// run enters the pod's network namespace on a thread of its own (which
// dies with the goroutine, since it stays locked) and probes from there.
func run(p Probe, addr string, timeout time.Duration) Result {
	r := Result{ID: p.ID}
	runtime.LockOSThread()
	fd, err := unix.Open(p.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.Error = "opening netns: " + err.Error()
		return r
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		r.Error = "entering netns: " + err.Error()
		return r
	}
	conn, err := net.DialTimeout(p.Protocol, addr, timeout)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer conn.Close()
	if p.Protocol == "tcp" {
		r.Connected = true
		return r
	}
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("hostname")); err != nil {
		r.Error = err.Error()
		return r
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Connected, r.Reply = true, string(buf[:n])
	return r
}
