package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Plugin runs kubectl xila-guard as a user runs it: kubectl finds the
// kubectl-xila_guard binary of BinDir on PATH. It returns the output and
// the exit code; err is set only when the plugin could not run.
func (c *Cluster) Plugin(ctx context.Context, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"xila-guard", "--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Path = c.BinDir + "/kubectl"
	cmd.Env = append(os.Environ(), "PATH="+c.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0, nil
	case errors.As(err, &exit):
		return string(out), exit.ExitCode(), nil
	}
	return string(out), -1, fmt.Errorf("kubectl xila-guard %s: %w", strings.Join(args, " "), err)
}

// PluginLine returns the line of a table the plugin printed whose first
// column is name, split into its columns; nil when there is none.
func PluginLine(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// ExplainPending checks what kubectl xila-guard explain says of a pod kept
// Pending by its policy on refused and off allowed: refused gets a deny
// with reason, allowed an allow, and the exit code is 0 (a node is
// allowed) exactly when allowed is set.
func (c *Cluster) ExplainPending(ctx context.Context, profile, ns, pod, refused, reason, allowed string) (string, error) {
	out, code, err := c.Plugin(ctx, "explain", "pod", ns+"/"+pod, "--profile", profile)
	if err != nil {
		return "", err
	}
	if f := PluginLine(out, refused); len(f) < 4 || f[2] != "deny" || !strings.Contains(f[3], reason) {
		return "", fmt.Errorf("kubectl xila-guard explain: node %s %v, want deny %s:\n%s", refused, f, reason, out)
	}
	want := 1
	if allowed != "" {
		want = 0
		if f := PluginLine(out, allowed); len(f) < 3 || f[2] != "allow" {
			return "", fmt.Errorf("kubectl xila-guard explain: node %s %v, want allow:\n%s", allowed, f, out)
		}
	}
	if code != want {
		return "", fmt.Errorf("kubectl xila-guard explain exited %d, want %d:\n%s", code, want, out)
	}
	return out, nil
}
