//go:build integration

package integration

import (
	"net/http"
	"testing"
	"time"
)

// TestIntegrationShutdownDrains: after SIGTERM the webhook reports not
// ready but keeps answering for --shutdown-delay, so that admission calls
// that still reach it while the nodes learn it left the Service are
// answered, and then stops.
func TestIntegrationShutdownDrains(t *testing.T) {
	w := startWebhook(t, "--shutdown-delay=2s")
	get := func(path string) (int, error) {
		resp, err := w.client.Get("https://" + w.addr + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	w.cancel()
	time.Sleep(300 * time.Millisecond)
	if code, err := get("/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d, %v; want 503", code, err)
	}
	if code, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz while draining: %d, %v; want 200 (still serving)", code, err)
	}
	select {
	case err := <-w.done:
		t.Fatalf("stopped before the delay: %v", err)
	case <-time.After(time.Second):
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5 s after the delay")
	}
	w.cancel = nil
	if _, err := get("/healthz"); err == nil {
		t.Error("answering after it stopped")
	}
}
