// Package schedrun runs xila-guard-scheduler inside another program — the
// integration tests and the benchmark — from the same configuration file
// and plugin registry as the binary, without its HTTPS endpoint and
// leader election.
package schedrun

import (
	"context"
	"fmt"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/xila-guard/xila-guard/components/scheduler/pkg/enforcement"
)

// Start builds a scheduler from configFile, whose clientConnection names
// the kubeconfig, with the XilaGuardEnforcement plugin and any further
// plugins registered, and runs it until ctx ends. It returns once the
// scheduler's informers have synced.
func Start(ctx context.Context, configFile string, plugins ...app.Option) (*scheduler.Scheduler, error) {
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0
	registry := append([]app.Option{app.WithPlugin(enforcement.Name, enforcement.New)}, plugins...)
	cc, sched, err := app.Setup(ctx, opts, registry...)
	if err != nil {
		return nil, fmt.Errorf("setting up the scheduler from %s: %w", configFile, err)
	}
	if cc.LeaderElection != nil {
		return nil, fmt.Errorf("%s enables leader election, which schedrun does not run", configFile)
	}
	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(ctx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.WaitForCacheSync(ctx.Done())
	}
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the scheduler's event handlers: %w", err)
	}
	go func() {
		sched.Run(ctx)
		cc.EventBroadcaster.Shutdown()
	}()
	return sched, nil
}
