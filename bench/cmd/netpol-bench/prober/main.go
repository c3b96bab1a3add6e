// Command prober runs on a kind node for netpol-bench. It opens sockets in
// the network namespaces of the node's pods (found by pod IP), so the
// packets leave and enter through the pods' own interfaces and the agent's
// programs on them, with no image of its own in the pods.
//
// It reads one JSON command per line on stdin and writes one JSON event per
// line on stdout; it exits when stdin closes. Commands:
//
//	{"op":"stream","id":"s","src":"10.244.1.5","dst":"10.244.2.7:8080","every":"10ms","timeout":"250ms"}
//	    TCP connects from src's netns to dst on a fixed schedule, each with
//	    its own timeout; events report every change of verdict in the order
//	    the probes started: {"ev":"verdict","id":"s","seq":1,"t":<unix ns>,"v":"allow"}.
//	{"op":"stop","id":"s"}
//	    ends a stream: {"ev":"stopped","id":"s","n":{"allow":..,"deny":..}}.
//	{"op":"serve","id":"e","src":"10.244.2.7","port":5001}
//	    a one-byte echo server in src's netns: {"ev":"serving","id":"e"}.
//	{"op":"rr","id":"r","src":..,"dst":..,"mode":"rr"|"crr","duration":"10s"}
//	    request/response (one connection) or connect/request/response/close
//	    loops for the duration: {"ev":"rr","id":"r","n":..,"errors":..,"ns":..}.
//	{"op":"cpu","id":"c"}
//	    the prober's own CPU time so far: {"ev":"cpu","id":"c","ns":..}.
//
// A verdict is "allow" when the connection is established or refused (a
// reset proves the SYN was let through both ways), "deny" when nothing
// answers within the timeout, "error: ..." for anything else.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// command is one line of input.
type command struct {
	Op       string `json:"op"`
	ID       string `json:"id"`
	Src      string `json:"src,omitempty"`
	Dst      string `json:"dst,omitempty"`
	Port     int    `json:"port,omitempty"`
	Mode     string `json:"mode,omitempty"`
	Every    string `json:"every,omitempty"`
	Timeout  string `json:"timeout,omitempty"`
	Duration string `json:"duration,omitempty"`
}

// event is one line of output.
type event struct {
	Ev     string         `json:"ev"`
	ID     string         `json:"id,omitempty"`
	Seq    int64          `json:"seq,omitempty"`
	T      int64          `json:"t,omitempty"`
	V      string         `json:"v,omitempty"`
	N      int64          `json:"n,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
	Errors int64          `json:"errors,omitempty"`
	NS     int64          `json:"ns,omitempty"`
	Msg    string         `json:"msg,omitempty"`
}

// output serializes events from every goroutine.
type output struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
}

func (o *output) send(e event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enc.Encode(e)
	o.w.Flush()
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	out := &output{w: w, enc: json.NewEncoder(w)}
	p := newProber(out)
	go watchStalls(out, 100*time.Millisecond)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			out.send(event{Ev: "error", Msg: fmt.Sprintf("bad command %q: %v", sc.Text(), err)})
			continue
		}
		if err := p.handle(c); err != nil {
			out.send(event{Ev: "error", ID: c.ID, Msg: err.Error()})
		}
	}
}

// watchStalls reports every time a 10 ms ticker falls behind by limit or
// more: the prober itself was not scheduled, so probe timeouts around that
// time say nothing about the network.
func watchStalls(out *output, limit time.Duration) {
	const period = 10 * time.Millisecond
	last := time.Now()
	for range time.Tick(period) {
		now := time.Now()
		if lag := now.Sub(last) - period; lag >= limit {
			out.send(event{Ev: "stall", T: now.UnixNano(), NS: int64(lag)})
		}
		last = now
	}
}
