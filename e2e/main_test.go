//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support/kind"
)

// testenv is the environment every feature of the suite runs in.
var testenv env.Environment

// suite is what TestMain learned about the cluster and the images.
var suite settings

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	var err error
	suite, err = settingsFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 2
	}
	cluster := kind.NewCluster(suite.ClusterName).WithPath(filepath.Join(suite.BinDir, "kind"))
	testenv = env.NewWithConfig(envconf.New())
	testenv.Setup(
		envfuncs.CreateClusterWithConfig(cluster, suite.ClusterName,
			filepath.Join(suite.RepoRoot, "hack/kind/cluster.yaml"), kind.WithImage(suite.NodeImage)),
		podNetwork(suite),
		loadImages(suite),
	)
	code := testenv.Run(m)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if code != 0 {
		dir := filepath.Join(suite.RepoRoot, "_output", "e2e-logs", time.Now().UTC().Format("20060102T150405Z"))
		if err := cluster.ExportLogs(ctx, dir); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: exporting cluster logs: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: cluster logs exported to %s\n", dir)
		}
	}
	if os.Getenv("KEEP_CLUSTER") == "1" {
		fmt.Fprintf(os.Stderr, "e2e: KEEP_CLUSTER=1: cluster %s kept (kubeconfig %s)\n", suite.ClusterName, cluster.GetKubeconfig())
		return code
	}
	if err := cluster.Destroy(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: deleting cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
