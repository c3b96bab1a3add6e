//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/scheduler/pkg/schedrun"
)

// pluginArgs configure XilaGuardEnforcement for one test.
type pluginArgs struct {
	acceptMock bool
}

// startScheduler runs xila-guard-scheduler from the repository's example
// configuration, changed only where a test must: the API server, no leader
// election, the evaluator's profile, and any extra plugins enabled on
// every extension point they implement. It stops when the test ends.
func startScheduler(t *testing.T, args pluginArgs, extra ...namedPlugin) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 500, "burst": 1000}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	pc := profile["pluginConfig"].([]any)[0].(map[string]any)
	pc["args"].(map[string]any)["acceptMock"] = args.acceptMock
	multi := profile["plugins"].(map[string]any)["multiPoint"].(map[string]any)
	var options []app.Option
	for _, p := range extra {
		multi["enabled"] = append(multi["enabled"].([]any), map[string]any{"name": p.name})
		options = append(options, app.WithPlugin(p.name, p.factory))
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := schedrun.Start(ctx, file, options...); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		// Let the scheduler's goroutines notice before the next test
		// starts another one.
		time.Sleep(100 * time.Millisecond)
	})
}
