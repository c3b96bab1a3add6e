// Package agent is the Xila Guard node agent: it compiles Kubernetes
// NetworkPolicy into eBPF maps and enforces it on every local pod's interface.
package agent
