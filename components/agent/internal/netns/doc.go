// Package netns creates named network namespaces and veth topologies for the
// agent's kernel tests, runs code inside them, and removes them afterwards.
// It needs root and iproute2.
package netns
