package wire

import "github.com/xila-guard/xila-guard/components/api/guard"

// AppendResponse appends the JSON encoding of r to b: byte for byte what
// encoding/json produces, which the tests and FuzzAppendResponse check,
// without reflection. The answer to a request of thousands of nodes is
// megabytes, and encoding it was a large share of the server's work.
//
// Adding a field to EvaluateResponse, Verdict or NodeResult means adding
// it here; the tests fail until then.
func AppendResponse(b []byte, r *EvaluateResponse) []byte {
	b = appendKey(b, `{"profile":`, string(r.Profile))
	b = appendTime(append(b, `,"evaluatedAt":`...), r.EvaluatedAt)
	b = appendKey(b, `,"pod":{"decision":`, string(r.Pod.Decision))
	b = appendReasons(append(b, `,"reasons":`...), r.Pod.Reasons)
	b = appendKey(b, `,"message":`, r.Pod.Message)
	b = append(b, `},"results":`...)
	if r.Results == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNodeResult(b, &r.Results[i])
	}
	return append(b, "]}"...)
}

func appendNodeResult(b []byte, r *NodeResult) []byte {
	b = appendKey(b, `{"node":`, r.Node)
	b = appendKey(b, `,"decision":`, string(r.Decision))
	b = appendReasons(append(b, `,"reasons":`...), r.Reasons)
	b = appendKey(b, `,"message":`, r.Message)
	if r.Incarnation != "" {
		b = appendKey(b, `,"incarnation":`, r.Incarnation)
	}
	return append(b, '}')
}

func appendReasons(b []byte, reasons []guard.Reason) []byte {
	return appendStrings(b, reasons)
}
