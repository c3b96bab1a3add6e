package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// webhookProcess is xila-guard-webhook running as a process of its own, so
// that its CPU is its own and the API server reaches it over TCP and TLS
// as it reaches a webhook Pod.
type webhookProcess struct {
	cmd *exec.Cmd
	// addr serves the API server's calls (HTTPS); metrics serves /metrics
	// and /readyz over plain HTTP.
	addr, metrics string
	caPEM         []byte
	log           string
	exited        chan error
}

// chartGo is the Go runtime's settings the chart gives the webhook
// (values.yaml: webhook.go).
var chartGo = []string{"GOGC=400", "GOMEMLIMIT=200MiB"}

// buildWebhook compiles xila-guard-webhook into dir.
func buildWebhook(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "xila-guard-webhook")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./components/webhook/cmd/xila-guard-webhook")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building xila-guard-webhook (run from the repository's root): %w", err)
	}
	return bin, nil
}

// startWebhook runs bin against the cluster with the chart's arguments and
// Go settings and a serving key of kind key, and waits until it is ready
// (its caches synced).
func startWebhook(ctx context.Context, o *options, bin, key string, c *cluster) (*webhookProcess, error) {
	dir := filepath.Join(c.Dir, "webhook-"+key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caPEM, err := servingPair(dir, key)
	if err != nil {
		return nil, fmt.Errorf("making the serving certificate: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	w := &webhookProcess{addr: addr, metrics: metrics, caPEM: caPEM, log: filepath.Join(dir, "webhook.log"), exited: make(chan error, 1)}
	logFile, err := os.Create(w.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// The arguments the chart's Deployment gives it, with its defaults for
	// the pool label, the binders and the profile.
	w.cmd = exec.Command(bin,
		"--listen="+addr, "--metrics-listen="+metrics,
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-key-file="+filepath.Join(dir, "tls.key"),
		"--kubeconfig="+c.Kubeconfig, "--profile=production", "--log-level=info")
	w.cmd.Env = os.Environ()
	if !o.goDefaults {
		w.cmd.Env = append(w.cmd.Env, chartGo...)
	}
	if o.webhookProcs > 0 {
		w.cmd.Env = append(w.cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", o.webhookProcs))
	}
	w.cmd.Stdout, w.cmd.Stderr = logFile, logFile
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { w.exited <- w.cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return w, nil
			}
		}
		select {
		case err := <-w.exited:
			return nil, fmt.Errorf("xila-guard-webhook exited (%v): %s", err, w.tail())
		case <-ctx.Done():
			w.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.stop()
			return nil, fmt.Errorf("xila-guard-webhook not ready after a minute: %s", w.tail())
		}
	}
}

func (w *webhookProcess) pid() int { return w.cmd.Process.Pid }

// stop ends the webhook with SIGTERM, as the kubelet does, and waits.
func (w *webhookProcess) stop() {
	_ = w.cmd.Process.Signal(os.Interrupt)
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// tail is the end of the webhook's log.
func (w *webhookProcess) tail() string {
	f, err := os.Open(w.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 2000 {
		_, _ = f.Seek(-2000, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// metricsText is the webhook's /metrics.
func (w *webhookProcess) metricsText(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
