// Command attest-bench measures the attestation path of
// components/attest against a real kube-apiserver and etcd (envtest
// assets, no kubelets), with the whole attestation controller running in
// this process (app.RunControllerWithConfig, lab profile) and one lab
// attester per node in a child process, each a real attester server
// signing real-format SEV-SNP reports with the lab chain. Every measure
// runs beside its baseline in every round, in another order each round:
//
//   - a fresh read, the quorum GET of a node's attested NodeSecurityState
//     that the scheduler's PreBind makes, beside a GET of the Node itself;
//   - a re-challenge, POST /v1/challenge/<node> to the controller (the
//     attester asked, the report verified, the state written), beside the
//     fresh read;
//   - verify.Verifier.Verify of one lab SEV-SNP report, beside the two
//     signature checks no verifier can skip;
//   - the controller attesting every node whose state was deleted, until
//     all are Passed again, beside this process writing as many states
//     itself, eight at a time.
//
// It prints the medians over rounds as Markdown (docs/benchmarks/attest.md):
//
//	go run ./bench/cmd/attest-bench --out _output/attest-bench.md
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == attestersCommand {
		cli.Main("attest-bench "+attestersCommand, func(context.Context) error { return serveAttesters(os.Args[2:]) })
		return
	}
	cli.Main("attest-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}
