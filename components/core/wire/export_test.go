package wire

import "github.com/xila-guard/xila-guard/components/core/internal/strictjson"

// DecodeReflective decodes and validates as DecodeEvaluateRequest did
// before it had a decoder of its own: with the reflective strict decoder.
// It is the baseline of the decoder benchmarks.
func DecodeReflective(body []byte, limits Limits) (*EvaluateRequest, error) {
	var req EvaluateRequest
	if err := strictjson.Unmarshal(body, &req); err != nil {
		return nil, requestError(err)
	}
	if errs := req.Validate(limits); len(errs) > 0 {
		return nil, newRequestError(errs)
	}
	return &req, nil
}
