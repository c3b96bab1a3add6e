package main

import (
	"context"
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
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/internal/benchdata"
	"github.com/xila-guard/xila-guard/components/core/internal/server"
	"github.com/xila-guard/xila-guard/components/core/wire"
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
	if cfg.url == "" {
		url, stop, err := startLoopback()
		if err != nil {
			return err
		}
		defer stop()
		cfg.url = url
	}
	c, err := client.New(cfg.url, client.WithTimeout(cfg.timeout))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tgpus/node\trequests\tconcurrency\tbody\tp50\tp90\tp99\tmax\treq/s\tcpu/req\t")
	for _, n := range cfg.sizes {
		s, err := measure(ctx, c, cfg, n)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t\n", n, cfg.gpus, cfg.requests, cfg.concurrency, size(s.body),
			s.quantile(0.50), s.quantile(0.90), s.quantile(0.99), s.took[len(s.took)-1], s.rate, s.cpu)
	}
	return tw.Flush()
}

// startLoopback serves a production evaluator on a loopback port.
func startLoopback() (string, func(), error) {
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileProduction})
	if err != nil {
		return "", nil, err
	}
	srv, err := server.New(server.Config{Evaluator: ev, MaxRequestBytes: 64 << 20})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}

type sample struct {
	took []time.Duration
	rate float64
	body int
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

func (s *sample) quantile(q float64) time.Duration {
	i := int(q*float64(len(s.took))+0.5) - 1
	return s.took[max(0, min(i, len(s.took)-1))]
}

func size(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
}

// measure sends the warm-up and then the measured requests of one size.
func measure(ctx context.Context, c *client.Client, cfg *config, nodes int) (*sample, error) {
	req := benchdata.Request(nodes, cfg.gpus, time.Now())
	body := wire.AppendRequest(nil, req)
	for range cfg.warmup {
		if _, err := c.Evaluate(ctx, req); err != nil {
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
	var err error
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
	return &sample{took: took, rate: float64(cfg.requests) / elapsed.Seconds(), body: len(body),
		cpu: cpu / time.Duration(cfg.requests)}, nil
}
