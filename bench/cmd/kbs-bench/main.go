// Command kbs-bench measures the key broker of components/attest/kbs
// against a real kube-apiserver and etcd (envtest assets, no kubelets).
// The broker runs in this process as xila-guard-attest key-broker wires
// it: a controller-runtime cache for namespaces, TenantBindings (with the
// namespace index), PlacementPolicies, KeyReleasePolicies and the key
// Secrets; an uncached client for the pod, node and NodeSecurityState it
// re-reads on every decision; TokenReviews against the API server; the
// production evaluator; an Event recorder and an audit log. It serves
// plain HTTP on 127.0.0.1, and kbs.Client drives it from the same
// address, which is every pod's IP.
//
// Requests are sent open loop at a fixed rate (bench/internal/openloop),
// and each latency runs from the request's scheduled slot to its answer.
// Four measures, in another order every round:
//
//   - key release: a whole fresh exchange per request (auth, attest with
//     a TokenReview, GET resource with the evidence re-read, the policy
//     evaluated and the key sealed in a JWE, decrypted by the client);
//   - its baseline: a TokenReview, a GET of the pod and a GET of the
//     node's NodeSecurityState, made directly against the same API server;
//   - resource in a session: GET resource only, on sessions attested
//     before the measure;
//   - its baseline: the three live reads a resource request makes (pod,
//     Node, NodeSecurityState).
//
// It prints Markdown (docs/benchmarks/attest.md, "Key release"):
//
//	go run ./bench/cmd/kbs-bench --out _output/kbs-bench.md
package main

import (
	"context"
	"os"

	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

func main() {
	cli.Main("kbs-bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}
