// Command xila-guard-webhook is the fail-closed admission webhook of Xila
// Guard: /validate-pods (pods, pods/ephemeralcontainers, pods/binding) and
// /validate-nodes over HTTPS, with /healthz, /readyz and /metrics. Run it
// with -h for its flags; docs/webhook.md describes the rules.
package main

import (
	"os"

	"github.com/xila-guard/xila-guard/components/webhook/internal/app"
)

func main() {
	os.Exit(app.Main())
}
