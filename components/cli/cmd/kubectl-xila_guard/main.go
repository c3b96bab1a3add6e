// Command kubectl-xila_guard is the kubectl plugin of Xila Guard: put it
// on PATH and run kubectl xila-guard (kubectl maps the dash of a plugin's
// name to an underscore in its binary's).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/xila-guard/xila-guard/components/cli/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.ExecuteContext(ctx)
	code := plugin.ExitCode(err)
	if err != nil && code == plugin.ExitError {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	stop()
	os.Exit(code)
}
