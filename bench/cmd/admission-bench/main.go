// Command admission-bench measures what admission adds to a pod CREATE
// through a real kube-apiserver and etcd (envtest assets, no kubelets).
// Open loop at fixed rates (each request has a slot, and its latency
// counts from that slot, so a slow API server cannot hide behind a
// generator that waits for it), it creates protected pods in the
// namespaces of many tenants, with dryRun=All and for real, under three
// variants that alternate within every round:
//
//   - none: no admission of xila-guard's;
//   - cel: a ValidatingAdmissionPolicy doing the webhook's
//     node-independent checks (privileged containers, host namespaces,
//     hostPath volumes, the scheduler name and spec.nodeName), evaluated
//     in the API server: the floor any webhook is judged against;
//   - webhook: the xila-guard-webhook binary in a process of its own,
//     registered as the chart registers it.
//
// It prints, as Markdown, the medians over rounds of the client's p50 and
// p99, the API server's own admission metrics, and the CPU each process
// spent per request (docs/benchmarks/webhook.md):
//
//	go run ./bench/cmd/admission-bench --rounds 5
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("admission-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}
