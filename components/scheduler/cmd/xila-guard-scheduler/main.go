// Command xila-guard-scheduler is kube-scheduler with the
// XilaGuardEnforcement plugin registered. Run it with a configuration whose
// xila-guard-scheduler profile enables the plugin and disables the
// TaintToleration filter (components/scheduler/config/config.yaml).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/xila-guard/xila-guard/components/scheduler/pkg/enforcement"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(enforcement.Name, enforcement.New))
	os.Exit(cli.Run(command))
}
