// Package observe is the Xila Guard controller that publishes node evidence as
// NodeSecurityState, taints pool nodes, evaluates pods after binding and
// reports drift when evidence changes.
package observe
