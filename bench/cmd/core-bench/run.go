package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/benchdata"
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/server"
)

type config struct {
	url         string
	sizes       []int
	gpus        int
	requests    int
	warmup      int
	concurrency int
	timeout     time.Duration
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	var sizes string
	fs := flag.NewFlagSet("core-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "", "evaluator base URL; empty starts one on loopback in this process")
	fs.StringVar(&sizes, "nodes", "1,100,5000", "comma-separated node counts per request")
	fs.IntVar(&c.gpus, "gpus", 1, "GPUs per node in the evidence")
	fs.IntVar(&c.requests, "requests", 2000, "measured requests per node count")
	fs.IntVar(&c.warmup, "warmup", 100, "unmeasured requests per node count, sent first")
	fs.IntVar(&c.concurrency, "concurrency", 1, "requests in flight at once")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout per request")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--nodes: %q is not a node count", s)
		}
		c.sizes = append(c.sizes, n)
	}
	if c.requests < 1 || c.warmup < 0 || c.concurrency < 1 || c.gpus < 0 || c.gpus > 64 {
		return nil, errors.New("--requests and --concurrency must be at least 1, --warmup at least 0, --gpus 0 to 64")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parse(args, stderr)
	if err != nil {
		return err
	}
	var served *serverTimes
	if cfg.url == "" {
		url, times, stop, err := startLoopback()
		if err != nil {
			return err
		}
		defer stop()
		cfg.url, served = url, times
	}
	c, err := client.New(cfg.url, client.WithTimeout(cfg.timeout))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tgpus/node\trequests\tconcurrency\tbody\tp50\tp90\tp99\tmax\treq/s\tcpu/req\tserver p50\tserver p99\t")
	for _, n := range cfg.sizes {
		s, err := measure(ctx, c, cfg, n, served)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		srvP50, srvP99 := "-", "-"
		if len(s.served) > 0 {
			srvP50, srvP99 = quantile(s.served, 0.50).String(), quantile(s.served, 0.99).String()
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", n, cfg.gpus, cfg.requests, cfg.concurrency, size(s.body),
			quantile(s.took, 0.50), quantile(s.took, 0.90), quantile(s.took, 0.99), s.took[len(s.took)-1], s.rate, s.cpu, srvP50, srvP99)
	}
	return tw.Flush()
}

// startLoopback serves a production evaluator on a loopback port, timing
// every request it handles.
func startLoopback() (string, *serverTimes, func(), error) {
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileProduction})
	if err != nil {
		return "", nil, nil, err
	}
	srv, err := server.New(server.Config{Evaluator: ev, MaxRequestBytes: 64 << 20})
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	times := &serverTimes{}
	hs := &http.Server{Handler: times.wrap(srv), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), times, func() { _ = hs.Close() }, nil
}

// serverTimes records how long the server's handler took for each request,
// from the request line and headers read to the answer written: the
// evaluator's own latency, which its request duration histogram measures
// too, without the client's encoding and decoding.
type serverTimes struct {
	mu   sync.Mutex
	took []time.Duration
}

func (t *serverTimes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(t0)
		t.mu.Lock()
		t.took = append(t.took, d)
		t.mu.Unlock()
	})
}

// take waits until n requests were recorded since the last take (a handler
// records just after its answer is written, so the client may be done
// first), and returns their durations, sorted.
func (t *serverTimes) take(n int) ([]time.Duration, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		t.mu.Lock()
		if len(t.took) >= n || time.Now().After(deadline) {
			out := t.took
			t.took = nil
			t.mu.Unlock()
			if len(out) != n {
				return nil, fmt.Errorf("the server handled %d requests, want %d", len(out), n)
			}
			slices.Sort(out)
			return out, nil
		}
		t.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

type sample struct {
	took   []time.Duration
	served []time.Duration // the in-process server's own times, when it runs here
	rate   float64
	body   int
	// cpu is the process's CPU time per request, client and in-process
	// server together; unlike latency it does not grow when other work
	// competes for the machine.
	cpu time.Duration
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func size(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
}

// measure sends the warm-up and then the measured requests of one size.
func measure(ctx context.Context, c *client.Client, cfg *config, nodes int, served *serverTimes) (*sample, error) {
	req := benchdata.Request(nodes, cfg.gpus, time.Now())
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	for range cfg.warmup {
		if _, err := c.Evaluate(ctx, req); err != nil {
			return nil, err
		}
	}
	if served != nil {
		if _, err := served.take(cfg.warmup); err != nil { // forget the warm-up
			return nil, err
		}
	}
	took := make([]time.Duration, cfg.requests)
	next := make(chan int)
	errs := make(chan error, cfg.concurrency)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	for range cfg.concurrency {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				if _, err := c.Evaluate(ctx, req); err != nil {
					errs <- err
					return
				}
				took[i] = time.Since(t0)
			}
		})
	}
	err = nil
feed:
	for i := range cfg.requests {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	if err != nil {
		return nil, err
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	slices.Sort(took)
	s := &sample{took: took, rate: float64(cfg.requests) / elapsed.Seconds(), body: len(body),
		cpu: cpu / time.Duration(cfg.requests)}
	if served != nil {
		if s.served, err = served.take(cfg.requests); err != nil {
			return nil, err
		}
	}
	return s, nil
}
