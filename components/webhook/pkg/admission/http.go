package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Paths the webhook serves. PodsPath judges pods and
// pods/ephemeralcontainers, and bindings too; BindingsPath judges only
// pods/binding and the bindings resource; NodesPath judges nodes.
const (
	PodsPath     = guard.WebhookPath
	BindingsPath = "/validate-bindings"
	NodesPath    = "/validate-nodes"
	// RecordsPath is the mutating endpoint that records, on the bindings
	// of the record binders, the evidence the binding is judged on.
	RecordsPath = "/mutate-bindings-evidence"
)

// maxReviewBytes bounds a review body; the API server's own limit on an
// object is 3 MiB, and a review can carry two of them.
const maxReviewBytes = 7 << 20

// PodsHandler serves PodsPath.
func (v *Validator) PodsHandler() http.Handler {
	return v.handler(v.validatePod)
}

// BindingsHandler serves BindingsPath.
func (v *Validator) BindingsHandler() http.Handler {
	return v.handler(v.validateBindingRequest)
}

// RecordsHandler serves RecordsPath.
func (v *Validator) RecordsHandler() http.Handler {
	return v.handler(v.recordBinding)
}

// NodesHandler serves NodesPath.
func (v *Validator) NodesHandler() http.Handler {
	return v.handler(v.validateNode)
}

func (v *Validator) handler(validate func(ctx context.Context, req *admissionv1.AdmissionRequest) outcome) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		review, status, err := readReview(w, r)
		if err != nil {
			v.cfg.Metrics.malformed()
			v.log.Warn("malformed admission review", "status", status, "err", err, "remote", r.RemoteAddr)
			http.Error(w, "xila-guard webhook: "+err.Error(), status)
			return
		}
		req := review.Request
		if !v.cfg.Cluster.Synced() {
			o := deny("request", violation{RuleLookup, guard.ReasonLookupFailed, "",
				"the webhook's caches have not synced yet, so nothing can be judged"})
			v.respond(w, review, o, start)
			return
		}
		o := validate(r.Context(), req)
		v.respond(w, review, o, start)
	})
}

// respond writes the review's response and records the outcome.
func (v *Validator) respond(w http.ResponseWriter, review *admissionv1.AdmissionReview, o outcome, start time.Time) {
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: o.allowed()}
	if o.allowed() && len(o.patch) > 0 {
		body, err := json.Marshal(o.patch)
		if err != nil {
			http.Error(w, "xila-guard webhook: encoding the patch: "+err.Error(), http.StatusInternalServerError)
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = body, &pt
	}
	if !o.allowed() {
		causes := make([]metav1.StatusCause, len(o.violations))
		for i, vi := range o.violations {
			causes[i] = metav1.StatusCause{Type: metav1.CauseType(vi.reason), Message: vi.String(), Field: vi.field}
		}
		msg := message(o.subject, o.violations)
		resp.Result = &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: msg, Details: &metav1.StatusDetails{Causes: causes},
		}
		rs := reasons(o.violations)
		resp.AuditAnnotations = map[string]string{"reasons": strings.Join(rs, ","), "rule": o.violations[0].rule}
		v.log.Info("denied", "uid", string(req.UID), "resource", resourceString(req), "operation", string(req.Operation),
			"namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username, "reasons", rs, "message", msg)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	body, err := json.Marshal(&out)
	if err != nil {
		// A response that cannot be encoded is an error status, which the
		// API server's failurePolicy Fail turns into a refusal.
		http.Error(w, "xila-guard webhook: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	v.cfg.Metrics.observe(resourceString(req), string(req.Operation), o, time.Since(start))
}

// readReview decodes an AdmissionReview v1 POST. The error explains what
// is wrong, with the HTTP status to answer.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("method %s: an AdmissionReview is POSTed", r.Method)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", maxReviewBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("the body is not an AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, http.StatusBadRequest, fmt.Errorf("got apiVersion %q kind %q: want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview's request has no uid")
	}
	return review, 0, nil
}
