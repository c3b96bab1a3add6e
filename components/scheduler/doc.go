// Package scheduler is the controlled kube-scheduler of Xila Guard: the stock
// scheduler plus the XilaGuardEnforcement plugin, which admits a placement on a
// protected pool node only on an explicit allow from the evaluator.
package scheduler
