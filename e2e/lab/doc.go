// Package lab builds the Xila Guard lab on a kind cluster and checks it:
// the chart installed with helm, a tenant whose pool is the two workers —
// the first with compliant mock evidence, the second time-sliced — and the
// six phases that make demo prints. The e2e suite uses the same code, so
// the demo is what the suite tests.
package lab
