package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/xila-guard/xila-guard/bench/internal/host"
)

// options are the command-line settings of kbs-bench.
type options struct {
	pods, rate, rounds, maxSessions int
	duration, warmup                time.Duration
	assets, crds, out               string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kbs-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.pods, "pods", 20, "pods bound to the node, each with its own token; requests go round robin over them")
	fs.IntVar(&o.rate, "rate", 100, "requests per second, sent open loop")
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "how long each measure runs in each round")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "how long each measure runs once, unrecorded, before the first round")
	fs.IntVar(&o.rounds, "rounds", 4, "rounds; each runs every measure, in another order every round")
	// A whole exchange opens a session that lives --session-ttl (5m) and
	// is never closed: at 100 exchanges/s the broker's default of 10000
	// sessions is full after 100 s and auth answers 503.
	fs.IntVar(&o.maxSessions, "max-sessions", 1<<20, "the broker's --max-sessions")
	fs.StringVar(&o.assets, "assets", "_output/envtest", "directory with kube-apiserver and etcd")
	fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.pods < 1 || o.rate < 1 || o.rounds < 1 || o.duration < time.Second || o.warmup < 0 || o.maxSessions < 1 {
		return nil, errors.New("want --pods, --rate, --rounds and --max-sessions >= 1, --duration >= 1s and --warmup >= 0")
	}
	return o, nil
}

// round is what one round measured.
type round struct {
	loadBefore, loadAfter string
	order                 []string
	passes                map[string]pass
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.crds); err != nil {
		return fmt.Errorf("run kbs-bench from the repository's root, or set --crds: %w", err)
	}
	b, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	defer b.stop()
	senders := b.senders()
	// One exchange first, so that a broken setup fails with the broker's
	// reason rather than as errors in a table.
	if err := senders[mRelease].send(ctx, 0); err != nil {
		return fmt.Errorf("the first key release: %w", err)
	}
	if o.warmup > 0 {
		for _, m := range measures {
			if _, err := b.measure(ctx, senders[m], o.warmup); err != nil {
				return fmt.Errorf("warm-up, %s: %w", m, err)
			}
		}
	}
	start := time.Now()
	env := fmt.Sprintf("%d CPUs, GOMAXPROCS=%d, %s; %d pods on one node; %d requests/s open loop, %s per measure and round, %d rounds",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.pods, o.rate, o.duration, o.rounds)
	fmt.Fprintf(stderr, "%s\nstarted %s\n", env, start.UTC().Format(time.RFC3339))
	var rounds []round
	for i := range o.rounds {
		r := round{loadBefore: host.LoadAvg(), passes: map[string]pass{}, order: order(i)}
		for _, m := range r.order {
			p, err := b.measure(ctx, senders[m], o.duration)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, m, err)
			}
			if p.firstErr != nil {
				fmt.Fprintf(stderr, "round %d, %s: %d errors, the first: %v\n", i+1, m, errorsOf(p), p.firstErr)
			}
			r.passes[m] = p
		}
		r.loadAfter = host.LoadAvg()
		logRound(stderr, i+1, r)
		rounds = append(rounds, r)
	}
	var w io.Writer = stdout
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(stdout, f)
	}
	report(w, o, env, start, rounds)
	return nil
}

// order is the measures' order in round i: each measure next to its
// baseline, the baseline first in odd rounds, and the two pairs swapped
// every other round.
func order(i int) []string {
	pairs := [][]string{{mRelease, mReleaseFloor}, {mResource, mReadsFloor}}
	if i%2 == 1 {
		for _, p := range pairs {
			slices.Reverse(p)
		}
	}
	if i/2%2 == 1 {
		slices.Reverse(pairs)
	}
	return append(pairs[0], pairs[1]...)
}

func logRound(w io.Writer, n int, r round) {
	fmt.Fprintf(w, "round %d (load %s → %s):", n, r.loadBefore, r.loadAfter)
	for _, m := range r.order {
		p := r.passes[m]
		fmt.Fprintf(w, " %s p50 %s p99 %s errors %d;", m, ms(pct(p, 50)), ms(pct(p, 99)), errorsOf(p))
	}
	fmt.Fprintln(w)
}
