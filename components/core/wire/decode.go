package wire

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
)

// maxReportedErrors bounds how many field errors one answer lists, so that
// a request with thousands of bad nodes gets a short answer.
const maxReportedErrors = 20

// RequestError says why a request body was refused, field by field.
type RequestError struct {
	// Errors lists the problems; Field is empty for a problem with the body
	// as a whole, such as trailing data.
	Errors []FieldError
	// Omitted counts further problems that were not listed.
	Omitted int
}

// Error joins the problems, as in "nodes[3].state.observedAt: Required value".
func (e *RequestError) Error() string {
	parts := make([]string, 0, len(e.Errors)+1)
	for _, fe := range e.Errors {
		if fe.Field == "" {
			parts = append(parts, fe.Detail)
		} else {
			parts = append(parts, fe.Field+": "+fe.Detail)
		}
	}
	if e.Omitted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", e.Omitted))
	}
	return strings.Join(parts, "; ")
}

// Response renders the error as the body of a 400 answer.
func (e *RequestError) Response() ErrorResponse {
	return ErrorResponse{Message: e.Error(), Errors: e.Errors}
}

// Limits bound what one request may hold.
type Limits struct {
	// MaxNodes is the most nodes one request may carry; 0 means no limit.
	MaxNodes int
}

// DecodeEvaluateRequest decodes and validates a request body. A malformed
// body yields a *RequestError that names the offending field; any other
// error is the server's fault.
func DecodeEvaluateRequest(body []byte, limits Limits) (*EvaluateRequest, error) {
	// One copy of the body, that the request's strings are cut from.
	return DecodeEvaluateRequestString(string(body), limits)
}

// DecodeEvaluateRequestString is DecodeEvaluateRequest for a body held in
// a string, which spares the copy; the request's strings share its memory.
func DecodeEvaluateRequestString(body string, limits Limits) (*EvaluateRequest, error) {
	var d RequestDecoder
	return d.Decode(body, limits)
}

// A RequestDecoder decodes and validates requests as DecodeEvaluateRequest
// does, into memory it keeps for the next request: once it has seen a
// request of some size, decoding another of that size allocates next to
// nothing. The request Decode returns, and every list and pointer in it,
// belong to the decoder and are valid until its next Decode; its strings
// share the body's memory. A RequestDecoder is not safe for concurrent
// use; the zero value is ready.
type RequestDecoder struct {
	d    requestDecoder
	seen map[string]struct{}
}

// Decode decodes and validates body. A malformed body yields a
// *RequestError that names the offending field. Nothing of a previous
// request survives into the result.
func (d *RequestDecoder) Decode(body string, limits Limits) (*EvaluateRequest, error) {
	req, err := d.d.decode(body)
	if err != nil {
		return nil, requestError(err)
	}
	if d.seen == nil {
		d.seen = make(map[string]struct{}, len(req.Nodes))
	}
	errs := req.validate(limits, d.seen)
	clear(d.seen)
	if len(errs) > 0 {
		return nil, newRequestError(errs)
	}
	return req, nil
}

// requestError turns a decoding error into a *RequestError.
func requestError(err error) error {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("decoding request: %w", err)
	}
	detail := se.Msg
	if se.Path == "" {
		detail = se.Error()
	}
	return &RequestError{Errors: []FieldError{{Field: se.Path, Detail: detail}}}
}

func newRequestError(errs field.ErrorList) *RequestError {
	re := &RequestError{}
	for i, e := range errs {
		if i == maxReportedErrors {
			re.Omitted = len(errs) - i
			break
		}
		re.Errors = append(re.Errors, FieldError{Field: e.Field, Detail: e.ErrorBody()})
	}
	return re
}

// Validate checks a decoded request: the same rules as the CRDs for the
// policy and the evidence, plus the request's own.
func (r *EvaluateRequest) Validate(limits Limits) field.ErrorList {
	return r.validate(limits, make(map[string]struct{}, len(r.Nodes)))
}

// validate is Validate with an empty set to find duplicate node names.
func (r *EvaluateRequest) validate(limits Limits, seen map[string]struct{}) field.ErrorList {
	var errs field.ErrorList
	if r.Profile != "" && !r.Profile.IsValid() {
		errs = append(errs, field.NotSupported(field.NewPath("profile"), r.Profile, profileNames()))
	}
	pod := field.NewPath("pod")
	errs = append(errs, validateName(pod.Child("namespace"), r.Pod.Namespace, 63, true)...)
	errs = append(errs, validateName(pod.Child("name"), r.Pod.Name, 253, false)...)
	if t := r.Tenant; t != nil {
		p := field.NewPath("tenant")
		errs = append(errs, validateName(p.Child("id"), t.ID, 63, true)...)
		errs = append(errs, validateName(p.Child("pool"), t.Pool, 63, false)...)
	}
	if pol := r.Policy; pol != nil {
		p := field.NewPath("policy")
		errs = append(errs, validateName(p.Child("name"), pol.Name, 253, true)...)
		errs = append(errs, v1alpha1.ValidatePlacementPolicySpec(&pol.Spec, p.Child("spec"))...)
	}
	nodes := field.NewPath("nodes")
	if limits.MaxNodes > 0 && len(r.Nodes) > limits.MaxNodes {
		return append(errs, field.TooMany(nodes, len(r.Nodes), limits.MaxNodes))
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		errs = append(errs, validateNode(n, nodes, i)...)
		if _, dup := seen[n.Name]; dup {
			errs = append(errs, field.Duplicate(nodes.Index(i).Child("name"), n.Name))
		}
		seen[n.Name] = struct{}{}
	}
	return errs
}

// validateNode builds field paths only when something is wrong: requests
// with thousands of valid nodes are the common case.
func validateNode(n *Node, nodes *field.Path, i int) field.ErrorList {
	var errs field.ErrorList
	if n.Name == "" || len(n.Name) > 253 || len(n.UID) > 128 || len(n.Pool) > 63 {
		p := nodes.Index(i)
		errs = append(errs, validateName(p.Child("name"), n.Name, 253, true)...)
		errs = append(errs, validateName(p.Child("uid"), string(n.UID), 128, false)...)
		errs = append(errs, validateName(p.Child("pool"), n.Pool, 63, false)...)
	}
	if n.AllocatableGPUs != nil && *n.AllocatableGPUs < 0 {
		errs = append(errs, field.Invalid(nodes.Index(i).Child("allocatableGPUs"), *n.AllocatableGPUs,
			"must not be negative: the count of the node's allocatable GPU resources, or left out when unknown"))
	}
	if n.State != nil && len(v1alpha1.ValidateNodeSecurityStateSpec(n.State, statePath)) > 0 {
		errs = append(errs, v1alpha1.ValidateNodeSecurityStateSpec(n.State, nodes.Index(i).Child("state"))...)
	}
	return errs
}

// statePath stands in for nodes[i].state on the first, usually clean,
// pass; a state with errors is validated again under its real path.
var statePath = field.NewPath("state")

func validateName(path *field.Path, s string, maxLen int, required bool) field.ErrorList {
	switch {
	case s == "" && required:
		return field.ErrorList{field.Required(path, "")}
	case len(s) > maxLen:
		return field.ErrorList{field.TooLong(path, s, maxLen)}
	}
	return nil
}

func profileNames() []string {
	names := make([]string, 0, 2)
	for _, p := range guard.Profiles {
		names = append(names, string(p))
	}
	return names
}
