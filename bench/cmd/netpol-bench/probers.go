package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

const proberPath = "/usr/local/bin/xg-netpol-prober"

// proberEvent is one line the prober writes (see prober/main.go).
type proberEvent struct {
	Ev     string         `json:"ev"`
	ID     string         `json:"id"`
	Seq    int64          `json:"seq"`
	T      int64          `json:"t"`
	V      string         `json:"v"`
	N      int64          `json:"n"`
	Counts map[string]int `json:"counts"`
	Errors int64          `json:"errors"`
	NS     int64          `json:"ns"`
	Msg    string         `json:"msg"`
}

// change is a stream's verdict from the probe that started at t on.
type change struct {
	t time.Time
	v string
}

// nodeProber talks to the prober running in one kind node.
type nodeProber struct {
	node  string
	cmd   *exec.Cmd
	inMu  sync.Mutex // serializes writes; never held with mu
	in    io.WriteCloser
	mu    sync.Mutex
	waits map[string]chan proberEvent
	hist  map[string][]change
	// stalls are the times the prober itself was not scheduled for 100 ms
	// or more.
	stalls []change
	errs   []string
}

// startProbers copies the prober into every node and starts it there.
func startProbers(ctx context.Context, bin string, nodes []string) (map[string]*nodeProber, error) {
	out := map[string]*nodeProber{}
	for _, n := range nodes {
		if b, err := exec.CommandContext(ctx, "docker", "cp", bin, n+":"+proberPath).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("copying the prober to %s: %w: %s", n, err, b)
		}
		p := &nodeProber{node: n, waits: map[string]chan proberEvent{}, hist: map[string][]change{}}
		p.cmd = exec.Command("docker", "exec", "-i", "-e", "GODEBUG=asyncpreemptoff=1", n, proberPath)
		p.cmd.Stderr = os.Stderr
		in, err := p.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting the prober on %s: %w", n, err)
		}
		p.in = in
		go p.read(stdout)
		out[n] = p
	}
	return out, nil
}

func stopProbers(ps map[string]*nodeProber) {
	for _, p := range ps {
		p.in.Close()
		p.cmd.Wait()
	}
}

func (p *nodeProber) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e proberEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		p.mu.Lock()
		switch e.Ev {
		case "verdict":
			p.hist[e.ID] = append(p.hist[e.ID], change{t: time.Unix(0, e.T), v: e.V})
		case "stall":
			p.stalls = append(p.stalls, change{t: time.Unix(0, e.T), v: time.Duration(e.NS).String()})
		default:
			if w := p.waits[e.ID]; w != nil {
				delete(p.waits, e.ID)
				w <- e
			} else if e.Ev == "error" {
				p.errs = append(p.errs, e.ID+": "+e.Msg)
			}
		}
		p.mu.Unlock()
	}
}

func (p *nodeProber) send(cmd map[string]any) error {
	b, _ := json.Marshal(cmd)
	p.inMu.Lock()
	defer p.inMu.Unlock()
	_, err := p.in.Write(append(b, '\n'))
	return err
}

// call sends a command and waits for the event that answers it.
func (p *nodeProber) call(ctx context.Context, cmd map[string]any, timeout time.Duration) (proberEvent, error) {
	id := cmd["id"].(string)
	w := make(chan proberEvent, 1)
	p.mu.Lock()
	p.waits[id] = w
	p.mu.Unlock()
	if err := p.send(cmd); err != nil {
		return proberEvent{}, err
	}
	select {
	case e := <-w:
		if e.Ev == "error" {
			return e, fmt.Errorf("prober on %s: %s: %s", p.node, id, e.Msg)
		}
		return e, nil
	case <-time.After(timeout):
		return proberEvent{}, fmt.Errorf("prober on %s: no answer to %s in %s", p.node, id, timeout)
	case <-ctx.Done():
		return proberEvent{}, ctx.Err()
	}
}

// stream starts probing dst from the pod with address src.
func (p *nodeProber) stream(id, src, dst string, every, timeout time.Duration) error {
	return p.send(map[string]any{"op": "stream", "id": id, "src": src, "dst": dst,
		"every": every.String(), "timeout": timeout.String()})
}

// stop ends a stream and returns its verdict changes and probe counts.
func (p *nodeProber) stop(ctx context.Context, id string) ([]change, map[string]int, error) {
	e, err := p.call(ctx, map[string]any{"op": "stop", "id": id}, 30*time.Second)
	p.mu.Lock()
	h := p.hist[id]
	delete(p.hist, id)
	p.mu.Unlock()
	return h, e.Counts, err
}

// history is what a stream has reported so far.
func (p *nodeProber) history(id string) []change {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]change(nil), p.hist[id]...)
}

// cpu is the prober's CPU time so far.
func (p *nodeProber) cpu(ctx context.Context) time.Duration {
	e, err := p.call(ctx, map[string]any{"op": "cpu", "id": fmt.Sprintf("cpu-%d", time.Now().UnixNano())}, 10*time.Second)
	if err != nil {
		return 0
	}
	return time.Duration(e.NS)
}

// stallsBetween counts the prober's stalls in [from, to].
func (p *nodeProber) stallsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.stalls {
		if !s.t.Before(from) && !s.t.After(to) {
			n++
		}
	}
	return n
}
