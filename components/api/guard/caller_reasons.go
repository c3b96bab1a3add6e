package guard

// Reasons that callers of the evaluator report on their own behalf: the
// evaluator never returns them. They explain a refusal made without an
// evaluator decision, or a decision that was set aside because what it
// judged has changed. Like the evaluator's, they never change meaning.
const (
	// ReasonEvaluatorTimeout: the evaluator did not answer within the
	// caller's timeout, so nothing is allowed.
	ReasonEvaluatorTimeout Reason = "EVALUATOR_TIMEOUT"
	// ReasonEvaluatorUnavailable: the evaluator could not be reached, or the
	// caller stopped asking it for a while after repeated failures.
	ReasonEvaluatorUnavailable Reason = "EVALUATOR_UNAVAILABLE"
	// ReasonEvaluatorError: the evaluator answered with an error status, or
	// with an answer that could not be decoded or did not match the request.
	ReasonEvaluatorError Reason = "EVALUATOR_ERROR"
	// ReasonNodeChanged: between the decision and the bind, the node was
	// deleted or replaced (another UID), or its evidence incarnation changed.
	ReasonNodeChanged Reason = "NODE_CHANGED"
)

// CallerReasons lists the reasons callers report, in the order above. None
// of them is among Reasons.
var CallerReasons = []Reason{
	ReasonEvaluatorTimeout, ReasonEvaluatorUnavailable, ReasonEvaluatorError, ReasonNodeChanged,
}
