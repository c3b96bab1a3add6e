// Package cli holds kubectl-xila_guard, the kubectl plugin of Xila Guard
// (package plugin, command cmd/kubectl-xila_guard): explain a pod's
// placement, test policies offline, check an installation.
package cli
