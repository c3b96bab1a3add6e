// Command xila-guard-attest is the attestation component: "controller"
// challenges the nodes' attesters and writes attested NodeSecurityStates,
// "attester" answers the challenges on a node. Run a subcommand with -h
// for its flags.
package main

import (
	"os"

	"github.com/xila-guard/xila-guard/components/attest/app"
)

func main() {
	os.Exit(app.Main())
}
