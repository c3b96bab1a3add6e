package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/testcert"
	"github.com/xila-guard/xila-guard/components/api/version"
)

// logBuffer collects the JSON log lines of a running server.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// find returns the first log line with the given message, waiting for it.
func (b *logBuffer) find(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(b.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no log line %q in:\n%s", msg, b.String())
	return nil
}

// start runs the command in the background and returns its address and a
// function that stops it and returns Run's error.
func start(t *testing.T, args ...string) (string, *logBuffer, func() error) {
	t.Helper()
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), io.Discard, logs) }()
	addr := logs.find(t, "serving")["addr"].(string)
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after cancellation")
			return nil
		}
	}
	t.Cleanup(func() { cancel() })
	return addr, logs, stop
}

const tinyRequest = `{"pod":{"namespace":"acme"},"tenant":{"id":"acme"},"nodes":[{"name":"n1","pool":"acme"}]}`

func TestRunVersion(t *testing.T) {
	old := version.Version
	version.Version = "v1.2.3-4-gabcdef"
	defer func() { version.Version = old }()
	var stdout strings.Builder
	if err := Run(context.Background(), []string{"--version"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "xila-guard-core v1.2.3-4-gabcdef\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

func TestRunServesAndStops(t *testing.T) {
	addr, logs, stop := start(t, "--profile", "lab")
	base := "http://" + addr
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}
	resp, err := http.Post(base+"/v1alpha1/evaluate", "application/json", strings.NewReader(tinyRequest))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"profile":"lab"`) ||
		!strings.Contains(string(body), `"reasons":["NO_POLICY"]`) {
		t.Errorf("POST = %d %s", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v, want nil after cancellation", err)
	}
	logs.find(t, "stopped")
	if line := logs.find(t, "serving"); line["profile"] != "lab" || line["level"] != "INFO" {
		t.Errorf("serving line %v", line)
	}
}

// waitListener tells when the server, having read want bytes from the
// first connection, asks for more: it has parsed the request head and its
// handler is waiting for the rest of the body. (Go's server drops a request
// whose head it finishes reading after shutdown began, so the test must wait
// for this point, not just for the connection to be accepted.)
type waitListener struct {
	net.Listener
	want    int
	waiting chan struct{}
}

func (l *waitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &waitConn{Conn: c, l: l}, nil
}

type waitConn struct {
	net.Conn
	l    *waitListener
	got  int
	once sync.Once
}

func (c *waitConn) Read(p []byte) (int, error) {
	if c.got >= c.l.want {
		c.once.Do(func() { close(c.l.waiting) })
	}
	n, err := c.Conn.Read(p)
	c.got += n
	return n, err
}

// TestRunDrainsRequestsInFlight stops the server while a request body is
// still arriving: the request must complete before Run returns.
func TestRunDrainsRequestsInFlight(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := inner.Addr().String()
	head := fmt.Sprintf("POST /v1alpha1/evaluate HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		addr, len(tinyRequest))
	sent := head + tinyRequest[:20]
	ln := &waitListener{Listener: inner, want: len(sent), waiting: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, ln, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	stop := func() error { cancel(); return <-done }

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, sent); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ln.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never read the request")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("serve returned (%v) with a request in flight", err)
	default:
	}
	if _, err := io.WriteString(conn, tinyRequest[20:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to the request in flight: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request in flight answered %d, want 200", resp.StatusCode)
	}
	if err := <-stopped; err != nil {
		t.Errorf("serve() = %v", err)
	}
}

// TestRunReloadsCertificate serves TLS and replaces the certificate files:
// new connections must get the new certificate without a restart.
func TestRunReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.Write(t, dir, 1)
	addr, logs, stop := start(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-reload-interval", "20ms")
	defer stop()
	served := func() int64 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	testcert.Write(t, dir, 2)
	deadline := time.Now().Add(5 * time.Second)
	for served() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs.find(t, "Updated current TLS certificate")
	if line := logs.find(t, "serving"); line["scheme"] != "https" {
		t.Errorf("serving line %v, want scheme https", line)
	}
}

func TestRunFails(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"address in use", []string{"--listen", busy.Addr().String()}, "listening on " + busy.Addr().String()},
		{"missing certificate", []string{"--listen", "127.0.0.1:0", "--tls-cert-file", dir + "/no.crt", "--tls-key-file", dir + "/no.key"},
			"loading the serving certificate"},
		{"bad flag", []string{"--profile", "staging"}, "--profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), tc.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
