// Command xila-guard-core serves the Xila Guard evaluator over HTTP:
// POST /v1alpha1/evaluate, /healthz, /readyz and /metrics. Run it with -h
// for its flags.
package main

import (
	"os"

	"github.com/xila-guard/xila-guard/components/core/internal/app"
)

func main() {
	os.Exit(app.Main())
}
