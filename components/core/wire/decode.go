package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
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

// DecodeEvaluateRequest decodes and validates a request body. Decoding is
// strict, as the API server's is: unknown and duplicate fields are
// refused, names are matched case-sensitively, and nothing may follow the
// body. A malformed body yields a *RequestError that names the offending
// field; any other error is the server's fault.
func DecodeEvaluateRequest(body []byte, limits Limits) (*EvaluateRequest, error) {
	var req EvaluateRequest
	strict, err := kjson.UnmarshalStrict(body, &req, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, &RequestError{Errors: []FieldError{locate(body, err)}}
	}
	if len(strict) > 0 {
		return nil, strictError(strict)
	}
	if errs := req.Validate(limits); len(errs) > 0 {
		return nil, newRequestError(errs)
	}
	return &req, nil
}

// DecodeEvaluateResponse decodes an answer. Members a newer evaluator may
// add are skipped; duplicate members and malformed JSON are refused.
// Whether the answer adds up is the caller's to check (package client).
func DecodeEvaluateResponse(body []byte) (*EvaluateResponse, error) {
	var resp EvaluateResponse
	strict, err := kjson.UnmarshalStrict(body, &resp, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("decoding the answer: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decoding the answer: %w", strictError(strict))
	}
	return &resp, nil
}

// locate names the member of a refused body that the error is about. The
// decoder names a value of the wrong type by its field names without list
// indices, and a malformed timestamp or duration not at all; on this path
// only, the body is decoded again member by member, down to the innermost
// one that fails.
func locate(body []byte, err error) FieldError {
	if isSyntax, _ := kjson.SyntaxErrorOffset(err); isSyntax {
		return syntaxError(err)
	}
	path, inner := innermost("", body, reflect.TypeFor[EvaluateRequest]())
	if inner == nil {
		return syntaxError(err)
	}
	fe := syntaxError(inner)
	if fe.Field != "" {
		path = joinPath(path, fe.Field)
	}
	fe.Field = path
	return fe
}

// innermost decodes raw as a typ and returns the path of the innermost
// member that does not decode, with its error; nil when raw decodes.
func innermost(path string, raw []byte, typ reflect.Type) (string, error) {
	err := json.Unmarshal(raw, reflect.New(typ).Interface())
	if err == nil {
		return "", nil
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if reflect.PointerTo(typ).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return path, err
	}
	switch typ.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return path, err
		}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if m, ok := members[name]; ok && name != "" && name != "-" {
				if p, e := innermost(joinPath(path, name), m, f.Type); e != nil {
					return p, e
				}
			}
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return path, err
		}
		for i, e := range elems {
			if p, e := innermost(fmt.Sprintf("%s[%d]", path, i), e, typ.Elem()); e != nil {
				return p, e
			}
		}
	}
	return path, err
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// syntaxError describes a body that is not JSON of the request's shape,
// naming the field when the decoder knows it.
func syntaxError(err error) FieldError {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return FieldError{Field: typ.Field, Detail: fmt.Sprintf("must be %s, not a JSON %s", typ.Type, typ.Value)}
	}
	if isSyntax, offset := kjson.SyntaxErrorOffset(err); isSyntax {
		return FieldError{Detail: fmt.Sprintf("malformed JSON at byte %d: %s", offset, strings.TrimPrefix(err.Error(), "json: "))}
	}
	return FieldError{Detail: strings.TrimPrefix(err.Error(), "json: ")}
}

// strictError lists the unknown and duplicate fields of a body.
func strictError(errs []error) *RequestError {
	re := &RequestError{}
	for i, err := range errs {
		if i == maxReportedErrors {
			re.Omitted = len(errs) - i
			break
		}
		fe := FieldError{Detail: err.Error()}
		if p, ok := err.(interface{ FieldPath() string }); ok {
			fe.Field = p.FieldPath()
			fe.Detail, _, _ = strings.Cut(err.Error(), " \"")
		}
		re.Errors = append(re.Errors, fe)
	}
	return re
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
	seen := make(map[string]struct{}, len(r.Nodes))
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
	if s := n.AllocatableSharedGPUs; s != nil && (*s < 0 || n.AllocatableGPUs == nil || *s > *n.AllocatableGPUs) {
		errs = append(errs, field.Invalid(nodes.Index(i).Child("allocatableSharedGPUs"), *s,
			"must be between 0 and allocatableGPUs: the replicas of shared GPUs among the node's allocatable GPU resources"))
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
