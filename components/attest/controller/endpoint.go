package controller

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// ChallengePattern is the route of the synchronous challenge: POST it with
// the node's name and no body.
const ChallengePattern = "POST /v1/challenge/{node}"

// DefaultChallengeTimeout bounds one synchronous challenge.
const DefaultChallengeTimeout = 10 * time.Second

// ChallengeResponse is the answer to a synchronous challenge: the
// NodeSecurityState now written, in brief.
type ChallengeResponse struct {
	// Node is the node's name.
	Node string `json:"node"`
	// NodeUID and Incarnation are the identity the evidence is bound to.
	NodeUID     types.UID `json:"nodeUID"`
	Incarnation string    `json:"incarnation"`
	// ObservedAt is the evidence's new observedAt.
	ObservedAt metav1.Time `json:"observedAt"`
	// Verdict is Passed or Failed, with the reason and message of a
	// failure.
	Verdict v1alpha1.AttestationVerdict `json:"verdict"`
	Reason  guard.Reason                `json:"reason,omitempty"`
	Message string                      `json:"message,omitempty"`
}

// ChallengeErrorResponse is the body of every answer but 200.
type ChallengeErrorResponse struct {
	// Message says what went wrong.
	Message string `json:"message"`
}

// ChallengeHandler serves Reconciler.Challenge over HTTP:
//
//	200 the state was written; the verdict may be Passed or Failed
//	404 no such node
//	409 no ready attester runs on the node
//	502 the attester did not answer (the evidence is left as it was)
//	504 the challenge did not finish within the timeout
//	500 anything else
type ChallengeHandler struct {
	// Reconciler challenges the node.
	Reconciler *Reconciler
	// Timeout bounds one challenge; DefaultChallengeTimeout when zero.
	Timeout time.Duration
	// Log receives one line per challenge that did not write.
	Log logr.Logger
}

// Handler returns the routes: ChallengePattern, and 405 for other methods.
func (h *ChallengeHandler) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(ChallengePattern, h.challenge)
	return mux
}

func (h *ChallengeHandler) challenge(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	ctx, cancel := context.WithTimeout(r.Context(), orDefault(h.Timeout, DefaultChallengeTimeout))
	defer cancel()
	nss, err := h.Reconciler.Challenge(ctx, name)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNodeNotFound):
			code = http.StatusNotFound
		case errors.Is(err, ErrNoAttester):
			code = http.StatusConflict
		case errors.Is(err, context.DeadlineExceeded):
			code = http.StatusGatewayTimeout
		case errors.Is(err, ErrAttesterUnreachable):
			code = http.StatusBadGateway
		}
		h.Log.Info("synchronous challenge failed", "node", name, "code", code, "err", err.Error())
		writeJSON(w, code, ChallengeErrorResponse{Message: err.Error()})
		return
	}
	a := nss.Spec.TEE.Attestation
	writeJSON(w, http.StatusOK, ChallengeResponse{
		Node: nss.Name, NodeUID: nss.Spec.NodeUID, Incarnation: nss.Spec.Incarnation, ObservedAt: nss.Spec.ObservedAt,
		Verdict: a.Verdict, Reason: a.Reason, Message: a.Message,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
