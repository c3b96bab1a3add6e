// Package guard holds the names that Xila Guard components share across
// process boundaries: the API group, labels, annotations and taints set by
// administrators, the scheduler and plugin names, the evaluator endpoint and
// its environment, the reason codes the evaluator returns, and the GPU
// resources whose allocatable callers count for the evaluator.
//
// A name defined here is part of the product's contract with operators: it
// appears in manifests, events and logs, so it never changes within a release
// line. Components import these constants instead of spelling the strings.
package guard
