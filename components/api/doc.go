// Package api holds the Go types of the guard.xila.us API group, the CRDs
// generated from them, and the labels, annotations and reason codes that every
// Xila Guard component shares.
package api
