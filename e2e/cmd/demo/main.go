// Command demo shows Xila Guard on the lab cluster in six phases, one line
// each, and exits non-zero when any phase differs from what it should
// show. make demo builds everything, brings up the cluster and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, bin, repoRoot, cluster, imageTag, agnhost, tenant, user string
	timeout                                                             time.Duration
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "_output/kubeconfig", "kubeconfig of the lab cluster")
	fs.StringVar(&o.bin, "bin", "_output/bin", "directory of kind, kubectl and helm")
	fs.StringVar(&o.repoRoot, "repo-root", ".", "the repository (chart, CRDs)")
	fs.StringVar(&o.cluster, "cluster", "xila-guard", "kind cluster name, to load the images into")
	fs.StringVar(&o.imageTag, "image-tag", "", "tag of the xila-guard/<component> images (required)")
	fs.StringVar(&o.agnhost, "agnhost", "", "agnhost image preloaded on the nodes (required)")
	fs.StringVar(&o.tenant, "tenant", "acme", "the lab tenant, and its namespace")
	fs.StringVar(&o.user, "user", "alice", "the user who acts for the tenant")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on the whole demo")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.imageTag == "" || o.agnhost == "" {
		return errors.New("--image-tag and --agnhost are required: run make demo")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	step := func(what string) { fmt.Fprintf(stderr, "demo: %s\n", what) }
	step("loading the component images into cluster " + o.cluster)
	if err := loadImages(ctx, o); err != nil {
		return err
	}
	c, err := lab.NewCluster(o.kubeconfig, o.bin, o.repoRoot, o.imageTag, o.agnhost)
	if err != nil {
		return err
	}
	step("installing the CRDs")
	if err := c.ApplyCRDs(ctx); err != nil {
		return err
	}
	step("making tenant " + o.tenant + ": worker 1 a compliant pool node, worker 2 a time-sliced one (mock evidence)")
	if err := c.DeleteTenant(ctx, o.tenant); err != nil {
		return fmt.Errorf("removing the tenant of an earlier run: %w", err)
	}
	t, err := c.CreateTenant(ctx, o.tenant)
	if err != nil {
		return err
	}
	l := &lab.Lab{Cluster: c, Tenant: t, User: o.user}
	failed := 0
	phases := l.Phases()
	for i, p := range phases {
		got, err := p.Run(ctx)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "phase %d  %-20s FAIL  want: %s; got: %v\n", i+1, p.Name, p.Want, err)
			continue
		}
		fmt.Fprintf(stdout, "phase %d  %-20s ok    %s\n", i+1, p.Name, got)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d phases differ from what they should show", failed, len(phases))
	}
	step(fmt.Sprintf("all %d phases as expected; the cluster stays up: %s/kubectl --kubeconfig %s get pods -A", len(phases), o.bin, o.kubeconfig))
	return nil
}

// loadImages loads every component image into the kind cluster's nodes.
func loadImages(ctx context.Context, o options) error {
	dirs, err := filepath.Glob(filepath.Join(o.repoRoot, "components", "*", "cmd", "xila-guard-*"))
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return errors.New("no component has a cmd/xila-guard-<name> package")
	}
	for _, d := range dirs {
		image := "xila-guard/" + filepath.Base(filepath.Dir(filepath.Dir(d))) + ":" + o.imageTag
		cmd := exec.CommandContext(ctx, filepath.Join(o.bin, "kind"), "load", "docker-image", "--name", o.cluster, image)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kind load docker-image %s: %w: run make images\n%s", image, err, out)
		}
	}
	return nil
}
