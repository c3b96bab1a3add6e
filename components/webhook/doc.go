// Package webhook is the fail-closed admission webhook of Xila Guard. It
// refuses every way around the controlled scheduler: alternate schedulers,
// nodeName pins, privileged pods, host namespaces and pool targeting.
package webhook
