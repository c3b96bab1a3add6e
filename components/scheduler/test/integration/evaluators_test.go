//go:build integration

package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// startCore runs the real xila-guard-core binary with a profile on a free
// loopback port and returns its URL once it is ready.
func startCore(t *testing.T, profile guard.Profile) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(coreBinary, "--listen", addr, "--profile", string(profile), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := "http://" + addr
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("xila-guard-core did not become ready: %v", err)
	}
	return base
}

// faultyEvaluator sits between the scheduler and a real xila-guard-core
// and misbehaves on demand: it can be slow, answer 500 or garbage, drop a
// node from the answer, or stop listening altogether.
type faultyEvaluator struct {
	t     *testing.T
	addr  string
	proxy *httputil.ReverseProxy
	fault atomic.Value // fault

	mu  sync.Mutex
	srv *http.Server
}

// fault is a way to misbehave; "" passes requests through.
type fault string

const (
	healthy   fault = ""
	slow      fault = "slow"
	erroring  fault = "500"
	garbage   fault = "garbage"
	dropsNode fault = "drops a node"
)

func newFaultyEvaluator(t *testing.T, upstream string) *faultyEvaluator {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyEvaluator{t: t, addr: freeAddr(t), proxy: httputil.NewSingleHostReverseProxy(u)}
	f.proxy.ModifyResponse = f.modify
	f.fault.Store(healthy)
	f.up()
	t.Cleanup(f.down)
	return f
}

func (f *faultyEvaluator) URL() string { return "http://" + f.addr }

func (f *faultyEvaluator) set(x fault) { f.fault.Store(x) }

// up listens again on the same address.
func (f *faultyEvaluator) up() {
	f.mu.Lock()
	defer f.mu.Unlock()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.srv = &http.Server{Handler: f}
	go func() { _ = f.srv.Serve(ln) }()
}

// down stops listening: calls are refused.
func (f *faultyEvaluator) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		_ = f.srv.Close()
		f.srv = nil
	}
}

func (f *faultyEvaluator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch f.fault.Load().(fault) {
	case slow:
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		return
	case erroring:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"message":"injected failure"}`))
		return
	case garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"profile":"production","results":[{"node":`))
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// modify drops the last node's result when asked to.
func (f *faultyEvaluator) modify(resp *http.Response) error {
	if f.fault.Load().(fault) != dropsNode {
		return nil
	}
	body, err := readAll(resp)
	if err != nil {
		return err
	}
	i := lastIndex(body, []byte(`,{"node":`))
	if i < 0 {
		i = lastIndex(body, []byte(`{"node":`))
	}
	if i < 0 {
		return errors.New("no result to drop")
	}
	end := lastIndex(body, []byte(`]`))
	body = append(append([]byte{}, body[:i]...), body[end:]...)
	setBody(resp, body)
	return nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
