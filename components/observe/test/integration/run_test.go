//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/observe/app"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
)

// TestIntegrationRun starts the whole controller, with leader election,
// and checks that it publishes evidence and answers its probes.
func TestIntegrationRun(t *testing.T) {
	o, err := app.ParseFlags([]string{"--core-url=in-process", "--leader-election-namespace=default",
		"--metrics-bind-address=127.0.0.1:19090", "--health-probe-bind-address=127.0.0.1:19091"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunWithConfig(ctx, cfg, o, io.Discard, logr.Discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	createNode(t, "run-1", map[string]string{guard.LabelTenantPool: "acme", evidence.LabelGPUCount: "1", evidence.LabelSharingStrategy: "none"}, "b")
	eventually(t, 20*time.Second, func() error {
		_, err := getState("run-1")
		return err
	})
	for _, url := range []string{"http://127.0.0.1:19091/healthz", "http://127.0.0.1:19091/readyz", "http://127.0.0.1:19090/metrics"} {
		eventually(t, 5*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		})
	}
}
