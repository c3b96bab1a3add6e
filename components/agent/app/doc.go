// Package app assembles the xila-guard-agent command: flags, JSON logs,
// the dataplane (or its audit stand-in), informers, the reconcile loop,
// the /healthz, /readyz and /metrics endpoints, and what happens when the
// agent stops: keep enforcing, or remove everything when its DaemonSet is
// gone (uninstall).
package app
