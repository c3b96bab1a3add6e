package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/xila-guard/xila-guard/bench/internal/fixture"
	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/bench/internal/openloop"
)

// scenario is one kind of request and the answer it must get.
type scenario struct {
	name    string
	body    []byte
	allowed bool
	// baseline sends to the constant handler instead of the webhook.
	baseline bool
}

// result is one measurement.
type result struct {
	p50, p99, max time.Duration
	// lateP99 is the 99th percentile of how late requests left the
	// generator after their slot: the generator's own timer and CPU
	// delays, kept out of the latencies and shown beside them.
	lateP99 time.Duration
	// newConns is how many connections the servers accepted meanwhile.
	newConns int64
	// cpu is the user plus system CPU time of this process (client and
	// webhook, not the evaluator) per request.
	cpu          time.Duration
	sent, errors int
}

func run(ctx context.Context, o options) error {
	collector := collectLikeTheChart(o.goDefaults)
	s, err := startServers()
	if err != nil {
		return err
	}
	defer s.close()
	scenarios := []scenario{
		{name: "baseline (constant answer, same TLS stack)", body: review(fixture.Pod("acme-ml", false)), allowed: true, baseline: true},
		{name: "allowed: protected pod (rules + evaluator)", body: review(fixture.Pod("acme-ml", false)), allowed: true},
		{name: "allowed: plain pod (pool rules, no evaluator)", body: review(fixture.Pod("web", false)), allowed: true},
		{name: "denied: privileged protected pod", body: review(fixture.Pod("acme-ml", true)), allowed: false},
	}
	fmt.Printf("webhook-load: GOMAXPROCS=%d, %s per measurement after %s warm-up, %d runs, webhook collector %s\n\n",
		runtime.GOMAXPROCS(0), o.duration, o.warmup, o.runs, collector)
	fmt.Printf("load average before: %s\n\n", host.LoadAvg())
	defer func() { fmt.Printf("\nload average after: %s\n", host.LoadAvg()) }()
	fmt.Println("| scenario | rate (req/s) | p50 | p99 | max | p99 / baseline p99 | sent late, p99 | new connections | cpu/req (client+webhook) | wrong or failed |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, rate := range o.rates {
		var baseP99 time.Duration
		for _, sc := range scenarios {
			var runs []result
			for range o.runs {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				load(ctx, s, sc, rate, o.warmup)
				runs = append(runs, load(ctx, s, sc, rate, o.duration))
			}
			m := median(runs)
			if sc.baseline {
				baseP99 = m.p99
			}
			ratio := "—"
			if baseP99 > 0 && !sc.baseline {
				ratio = fmt.Sprintf("%.2f×", float64(m.p99)/float64(baseP99))
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %d | %.0f µs | %d / %d |\n", sc.name, rate, ms(m.p50), ms(m.p99), ms(m.max), ratio, ms(m.lateP99), m.newConns,
				float64(m.cpu)/float64(time.Microsecond), m.errors, m.sent)
		}
	}
	return nil
}

// load sends sc at rate for d, open loop: each request leaves at its slot,
// in its own goroutine, whether or not earlier ones have answered, so a
// slow webhook builds a queue of requests in flight and the latencies show
// it. Latency counts from the moment the request left, as the API server
// measures it; how late the generator itself was is reported apart, since
// on a busy machine its timer wakes up to a few milliseconds late.
func load(ctx context.Context, s *servers, sc scenario, rate int, d time.Duration) result {
	url := s.webhook + "/validate-pods"
	if sc.baseline {
		url = s.baseline + "/validate-pods"
	}
	n := int(d.Seconds() * float64(rate))
	cpu0, conns0 := host.SelfCPU(), s.conns.Load()
	samples := openloop.Run(ctx, rate, n, func(int) error { return send(s.client, url, sc) })
	r := result{sent: n, newConns: s.conns.Load() - conns0, errors: openloop.Errors(samples)}
	if n > 0 {
		r.cpu = (host.SelfCPU() - cpu0) / time.Duration(n)
	}
	fromSend := func(s openloop.Sample) time.Duration { return s.FromSend }
	r.p50, r.p99 = openloop.Percentile(samples, 50, fromSend), openloop.Percentile(samples, 99, fromSend)
	r.max = openloop.Percentile(samples, 100, fromSend)
	r.lateP99 = openloop.Percentile(samples, 99, func(s openloop.Sample) time.Duration { return s.Late })
	return r
}

// send posts one review and checks the answer.
func send(c *http.Client, url string, sc scenario) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(sc.body))
	if err != nil {
		fmt.Fprintln(os.Stderr, "request failed:", err)
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "%s: status %d, %v: %.200s\n", sc.name, resp.StatusCode, err, body)
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if json.Unmarshal(body, &out) != nil || out.Response == nil {
		fmt.Fprintf(os.Stderr, "%s: not an admission review: %.200s\n", sc.name, body)
		return errors.New("not an admission review")
	}
	if out.Response.Allowed != sc.allowed {
		msg := ""
		if out.Response.Result != nil {
			msg = out.Response.Result.Message
		}
		fmt.Fprintf(os.Stderr, "%s: allowed %t, want %t: %s\n", sc.name, out.Response.Allowed, sc.allowed, msg)
		return errors.New("wrong answer")
	}
	return nil
}

// median takes, field by field, the median over runs.
func median(rs []result) result {
	pick := func(f func(result) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := result{
		p50:     pick(func(r result) time.Duration { return r.p50 }),
		p99:     pick(func(r result) time.Duration { return r.p99 }),
		max:     pick(func(r result) time.Duration { return r.max }),
		cpu:     pick(func(r result) time.Duration { return r.cpu }),
		lateP99: pick(func(r result) time.Duration { return r.lateP99 }),
	}
	for _, r := range rs {
		out.newConns += r.newConns
		out.sent += r.sent
		out.errors += r.errors
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
