//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
)

// podNetwork gives the cluster pod networking (hack/kind-network.sh, the
// script make kind-up uses) and waits for Ready nodes and CoreDNS. It
// converges, so it is safe on a reused cluster.
func podNetwork(s settings) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		kubeconfig := cfg.KubeconfigFile()
		steps := [][]string{
			{filepath.Join(s.RepoRoot, "hack/kind-network.sh"), s.ClusterName, kubeconfig},
			{filepath.Join(s.BinDir, "kubectl"), "--kubeconfig", kubeconfig, "wait", "--for=condition=Ready", "nodes", "--all", "--timeout=180s"},
			{filepath.Join(s.BinDir, "kubectl"), "--kubeconfig", kubeconfig, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s"},
		}
		for _, step := range steps {
			cmd := exec.CommandContext(ctx, step[0], step[1:]...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			cmd.Env = append(os.Environ(), "XG_BIN="+s.BinDir)
			if err := cmd.Run(); err != nil {
				return ctx, fmt.Errorf("%s: %w", filepath.Base(step[0]), err)
			}
		}
		return ctx, nil
	}
}

// loadImages loads every component image, and the Volcano images make e2e
// built, into the cluster's nodes.
func loadImages(s settings) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		for _, c := range s.Components {
			var err error
			if ctx, err = envfuncs.LoadImageToCluster(s.ClusterName, s.componentImage(c))(ctx, cfg); err != nil {
				return ctx, err
			}
		}
		// The DRA example driver's kubelet plugin runs on the workers.
		workers := []string{}
		for _, n := range []string{"worker", "worker2"} {
			workers = append(workers, s.ClusterName+"-"+n)
		}
		if _, err := envfuncs.LoadImageToCluster(s.ClusterName, s.DRAExampleImage, "--nodes", strings.Join(workers, ","))(ctx, cfg); err != nil {
			return ctx, err
		}
		// Volcano runs on the control plane only (the workers are pools).
		for _, img := range s.VolcanoImages {
			var err error
			if ctx, err = envfuncs.LoadImageToCluster(s.ClusterName, img, "--nodes", s.ClusterName+"-control-plane")(ctx, cfg); err != nil {
				return ctx, err
			}
		}
		return ctx, nil
	}
}
