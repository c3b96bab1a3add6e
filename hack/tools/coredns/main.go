// Command coredns is CoreDNS with only the plugins a Kubernetes cluster's DNS
// uses (kubeadm's default Corefile and the usual additions). Building the
// whole plugin set pulls every cloud SDK and triples the build time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// directives is the subset of CoreDNS's plugin.cfg in its order, which is
// the order plugins see a query.
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log",
	"loadbalance", "cache", "rewrite", "template", "hosts", "kubernetes",
	"loop", "forward", "whoami",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
