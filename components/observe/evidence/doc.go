// Package evidence publishes one NodeSecurityState per pool node from the
// node's feature labels: the labels of Node Feature Discovery and the NVIDIA
// GPU operator as source nfd, or, in lab mode, the guard.xila.us/mock-*
// labels as source mock. It refreshes observedAt on a period, so that
// evidence whose publisher stopped goes stale instead of staying trusted.
package evidence
