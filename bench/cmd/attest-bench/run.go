package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/bench/internal/openloop"
)

// options are the command-line settings of attest-bench.
type options struct {
	nodes, requests, verifies, rounds int
	assets, crds, labDir, out         string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("attest-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.nodes, "nodes", 500, "nodes, each with a ready attester pod")
	fs.IntVar(&o.requests, "requests", 500, "node reads, fresh reads and re-challenges per round, one at a time, round robin over the nodes")
	fs.IntVar(&o.verifies, "verifies", 1000, "verifications of one lab report, and as many baseline checks, per round")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; the report gives medians over rounds")
	fs.StringVar(&o.assets, "assets", "_output/envtest", "directory with kube-apiserver and etcd")
	fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
	fs.StringVar(&o.labDir, "lab-dir", "components/attest/testdata/labchain/lab", "the lab chain, as its Secret is mounted")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.nodes < 1 || o.requests < 1 || o.verifies < 1 || o.rounds < 1 {
		return nil, errors.New("want --nodes, --requests, --verifies and --rounds >= 1")
	}
	return o, nil
}

// round is what one round measured.
type round struct {
	loadBefore, loadAfter string
	// samples holds the latencies of each measure.
	samples map[string][]openloop.Sample
	// fleet holds the two fleet passes.
	fleet map[string]pass
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	for _, dir := range []string{o.crds, o.labDir} {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("run attest-bench from the repository's root, or set --crds and --lab-dir: %w", err)
		}
	}
	b, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	defer b.stop()
	start := time.Now()
	cold, err := b.startController(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "controller started; all %d nodes Passed %s after its start\n", o.nodes, ms(cold))
	env := fmt.Sprintf("%d CPUs, GOMAXPROCS=%d, %s, %d nodes, %d rounds of %d node reads, fresh reads and re-challenges each and %d verifications",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.nodes, o.rounds, o.requests, o.verifies)
	fmt.Fprintf(stderr, "%s\nstarted %s\n", env, start.UTC().Format(time.RFC3339))
	var rounds []round
	for i := range o.rounds {
		r := round{loadBefore: host.LoadAvg(), samples: map[string][]openloop.Sample{}, fleet: map[string]pass{}}
		// Each group runs in another order every round: a pair's
		// baseline first in odd rounds, second in even ones.
		for _, p := range b.pairs() {
			for _, m := range rotate(p, i) {
				if err := m.run(ctx, &r); err != nil {
					return fmt.Errorf("round %d, %s: %w", i+1, m.name, err)
				}
			}
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
	report(w, o, env, start, cold, rounds)
	return nil
}

// rotate starts ms at its k-th element.
func rotate(ms []measure, k int) []measure {
	k %= len(ms)
	return append(append([]measure{}, ms[k:]...), ms[:k]...)
}

func logRound(w io.Writer, i int, r round) {
	fmt.Fprintf(w, "round %d, load average %s → %s:", i, r.loadBefore, r.loadAfter)
	for _, name := range latencyMeasures {
		s := r.samples[name]
		fmt.Fprintf(w, " %s p50 %s p99 %s;", name, ms(pct(s, 50)), ms(pct(s, 99)))
	}
	for _, name := range fleetMeasures {
		p := r.fleet[name]
		fmt.Fprintf(w, " %s %s (CPU %.2f s);", name, ms(p.took), p.selfCPU.Seconds())
	}
	fmt.Fprintln(w)
}

func pct(s []openloop.Sample, p float64) time.Duration {
	return openloop.Percentile(s, p, func(s openloop.Sample) time.Duration { return s.FromSend })
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
