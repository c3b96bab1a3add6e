package kbs

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Defaults of Options.
const (
	// DefaultSessionTTL is how long an attested session lives: a client
	// fetches its keys right after it attests.
	DefaultSessionTTL = time.Minute
	// DefaultMaxSessions sustains DefaultMaxSessions/DefaultSessionTTL
	// new exchanges a second (333) on one replica.
	DefaultMaxSessions = 20000
)

// IndexBindingNamespace is the field index of TenantBindings by the
// namespaces they list, which Options.Cache must have.
const IndexBindingNamespace = "spec.namespaces"

// Options configure a Broker.
type Options struct {
	// Cache reads namespaces, TenantBindings (indexed by
	// IndexBindingNamespace), PlacementPolicies and KeyReleasePolicies.
	Cache client.Reader
	// Live reads pods, nodes and NodeSecurityStates from the API server
	// itself: a decision to release a key is never taken on a cache.
	Live client.Reader
	// Tokens verifies service-account tokens.
	Tokens TokenReviewer
	// Keys keeps the keys.
	Keys KeyStore
	// Evaluator judges the node's evidence against the tenant's policy.
	Evaluator *evaluate.Evaluator
	// Events records an Event on the pod for each decision; optional.
	Events events.EventRecorder
	// Audit writes a JSON line for each decision; optional.
	Audit *Audit
	// Log logs errors.
	Log logr.Logger
	// Clock defaults to the system clock.
	Clock clock.PassiveClock
	// SessionTTL is how long a session lives from auth; DefaultSessionTTL
	// when zero.
	SessionTTL time.Duration
	// MaxSessions bounds the live sessions; DefaultMaxSessions when zero.
	MaxSessions int
	// PeerAddress gives a request's source IP; RemoteAddress when nil.
	PeerAddress func(*http.Request) string
}

// Broker is the key broker's HTTP handler.
type Broker struct {
	opts     Options
	sessions *sessions
	mux      *http.ServeMux
}

// New returns a Broker.
func New(opts Options) (*Broker, error) {
	if opts.Cache == nil || opts.Live == nil || opts.Tokens == nil || opts.Keys == nil || opts.Evaluator == nil {
		return nil, errors.New("kbs: Cache, Live, Tokens, Keys and Evaluator are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.PeerAddress == nil {
		opts.PeerAddress = RemoteAddress
	}
	b := &Broker{opts: opts, sessions: newSessions(opts.MaxSessions), mux: http.NewServeMux()}
	b.mux.HandleFunc("POST "+PathAuth, b.auth)
	b.mux.HandleFunc("POST "+PathAttest, b.attest)
	b.mux.HandleFunc("GET "+PathResource+"{repository}/{type}/{tag}", b.resource)
	return b, nil
}

// ServeHTTP implements http.Handler.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.mux.ServeHTTP(w, r) }

// refusal is a request the broker answers with an error.
type refusal struct {
	status  int
	reasons []guard.Reason
	detail  string
}

func refuse(status int, reason guard.Reason, format string, args ...any) *refusal {
	return &refusal{status: status, reasons: []guard.Reason{reason}, detail: fmt.Sprintf(format, args...)}
}

// unavailable is a refusal because something could not be read: nothing
// is released on a question left unanswered.
func unavailable(format string, args ...any) *refusal {
	return &refusal{status: http.StatusServiceUnavailable, detail: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *refusal {
	return &refusal{status: http.StatusBadRequest, detail: fmt.Sprintf(format, args...)}
}

// teeTypes maps the KBS names of TEEs to the evidence's.
var teeTypes = map[string]v1alpha1.TEEType{
	"snp": v1alpha1.TEESEVSNP, "amd-sev-snp": v1alpha1.TEESEVSNP,
	"tdx": v1alpha1.TEETDX, "intel-tdx": v1alpha1.TEETDX,
}

func (b *Broker) auth(w http.ResponseWriter, r *http.Request) {
	var req Request
	if f := decodeJSON(r, &req); f != nil {
		b.answer(w, "auth", f)
		return
	}
	if major, _, _ := strings.Cut(req.Version, "."); major != "0" || req.Version == "" {
		b.answer(w, "auth", badRequest("protocol version %q is not supported; the broker speaks %s", req.Version, ProtocolVersion))
		return
	}
	if _, ok := teeTypes[req.TEE]; !ok {
		b.answer(w, "auth", badRequest("tee %q is not supported: want snp or tdx", req.TEE))
		return
	}
	sess := b.sessions.open(req.TEE, b.opts.Clock.Now(), b.opts.SessionTTL)
	sessionsLive.Set(float64(b.sessions.len()))
	if sess == nil {
		b.answer(w, "auth", unavailable("the broker holds %d sessions, its maximum; try again later", b.opts.MaxSessions))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: sess.id, Path: "/kbs", MaxAge: int(b.opts.SessionTTL.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	requestsTotal.WithLabelValues("auth", "ok", "NONE").Inc()
	writeJSON(w, http.StatusOK, Challenge{Nonce: sess.nonce, ExtraParams: []byte("{}")})
}

func (b *Broker) attest(w http.ResponseWriter, r *http.Request) {
	sess, f := b.session(r, false)
	if f != nil {
		b.answer(w, "attest", f)
		return
	}
	var att Attestation
	if f := decodeJSON(r, &att); f != nil {
		b.answer(w, "attest", f)
		return
	}
	peer := b.opts.PeerAddress(r)
	rec := &Record{Peer: peer}
	f = func() *refusal {
		if att.RuntimeData.Nonce != sess.nonce {
			return refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "runtime-data.nonce is not this session's nonce")
		}
		key, alg, err := PublicKey(att.RuntimeData.TEEPubKey)
		if err != nil {
			return refuse(http.StatusBadRequest, guard.ReasonPublicKeyInvalid, "%v", err)
		}
		if att.TEEEvidence.Token == "" {
			return refuse(http.StatusUnauthorized, guard.ReasonTokenInvalid, "tee-evidence.token is empty")
		}
		st, err := b.opts.Tokens.Review(r.Context(), att.TEEEvidence.Token)
		if err != nil {
			return unavailable("%v", err)
		}
		who, why := identify(st)
		if who == nil {
			return refuse(http.StatusUnauthorized, guard.ReasonTokenInvalid, "%s", why)
		}
		rec.Namespace, rec.Pod, rec.Node = who.namespace, who.pod, who.node
		pod, f := b.judge(r.Context(), &sess, who, peer, rec)
		if f != nil {
			b.event(pod, rec, f)
			return f
		}
		if !b.sessions.attest(sess.id, who, key, alg, b.opts.Clock.Now().Add(b.opts.SessionTTL)) {
			return refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "the session has already attested, or has expired")
		}
		b.event(pod, rec, nil)
		return nil
	}()
	b.record(rec, f, "the session attested")
	if f != nil {
		// A refused attestation ends a session that has not attested:
		// its nonce is not offered for another try.
		b.sessions.dropUnattested(sess.id)
		b.answer(w, "attest", f)
		return
	}
	requestsTotal.WithLabelValues("attest", "ok", "NONE").Inc()
	w.WriteHeader(http.StatusNoContent)
}

func (b *Broker) resource(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { releaseDuration.Observe(time.Since(start).Seconds()) }()
	path := r.PathValue("repository") + "/" + r.PathValue("type") + "/" + r.PathValue("tag")
	sess, f := b.session(r, true)
	if f != nil {
		b.answer(w, "resource", f)
		return
	}
	peer := b.opts.PeerAddress(r)
	who := sess.who
	rec := &Record{Namespace: who.namespace, Pod: who.pod, Node: who.node, Key: path, Peer: peer}
	var body []byte
	pod, f := b.judge(r.Context(), &sess, who, peer, rec)
	if f == nil {
		body, f = b.release(r.Context(), &sess, who, rec.Tenant, path)
	}
	b.event(pod, rec, f)
	b.record(rec, f, "key "+path+" released")
	if f != nil {
		b.answer(w, "resource", f)
		return
	}
	requestsTotal.WithLabelValues("resource", "ok", "NONE").Inc()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// session returns the request's session; attested says whether it must
// have attested.
func (b *Broker) session(r *http.Request, attested bool) (session, *refusal) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return session{}, refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "no %s cookie: start with POST %s", CookieName, PathAuth)
	}
	sess, ok := b.sessions.get(c.Value, b.opts.Clock.Now())
	switch {
	case !ok:
		return session{}, refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "the session is unknown or has expired: start again with POST %s", PathAuth)
	case attested && !sess.attested:
		return session{}, refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "the session has not attested: POST %s first", PathAttest)
	case !attested && sess.attested:
		return session{}, refuse(http.StatusUnauthorized, guard.ReasonSessionInvalid, "the session has already attested")
	}
	return sess, nil
}

// judge decides whether the identity's pod may receive keys now: it runs
// where its token says and where the request comes from, on a node whose
// attested evidence is the one it was bound against and satisfies its
// tenant's policy. It fills the record's tenant, and returns the pod for
// the Event.
func (b *Broker) judge(ctx context.Context, sess *session, who *identity, peer string, rec *Record) (*corev1.Pod, *refusal) {
	l := b.readLive(ctx, who)
	pod, node, f := b.whereabouts(l, who, peer)
	if f != nil {
		return pod, f
	}
	bound := pod.Annotations[guard.AnnotationBoundEvidence]
	if bound == "" {
		return pod, refuse(http.StatusForbidden, guard.ReasonBindingUnrecorded, "pod %s/%s has no %s annotation: neither the controlled scheduler nor the webhook, for an integration's binder, recorded the evidence it was bound against", pod.Namespace, pod.Name, guard.AnnotationBoundEvidence)
	}
	nss, err := l.nss, l.nssErr
	switch {
	case apierrors.IsNotFound(err):
		return pod, refuse(http.StatusForbidden, guard.ReasonEvidenceMissing, "node %s has no NodeSecurityState", node.Name)
	case err != nil:
		return pod, unavailable("reading the evidence of node %s: %v", node.Name, err)
	case nss.Spec.Source != v1alpha1.SourceAttested:
		return pod, refuse(http.StatusForbidden, guard.ReasonEvidenceNotAttested, "the evidence of node %s is %s, not attested", node.Name, nss.Spec.Source)
	}
	if now := nss.Spec.BoundEvidence(); now != bound {
		return pod, refuse(http.StatusForbidden, guard.ReasonNodeChanged, "pod %s/%s was bound against node evidence %s; the node's evidence is now %s", pod.Namespace, pod.Name, bound, now)
	}
	if want := teeTypes[sess.tee]; nss.Spec.TEE == nil || nss.Spec.TEE.Type != want {
		return pod, refuse(http.StatusForbidden, guard.ReasonEvidenceNotAttested, "the client says its TEE is %s; the attested evidence of node %s shows %s", want, node.Name, teeOf(nss))
	}
	ns := &corev1.Namespace{}
	if err := b.opts.Cache.Get(ctx, client.ObjectKey{Name: pod.Namespace}, ns); err != nil {
		return pod, unavailable("reading namespace %s: %v", pod.Namespace, err)
	}
	id, err := resolve.Namespace(ns, lookup{ctx, b.opts.Cache})
	if err != nil {
		return pod, unavailable("resolving the tenant of namespace %s: %v", pod.Namespace, err)
	}
	if id.Tenant != nil {
		rec.Tenant = id.Tenant.ID
	}
	candidate := wire.NodeOf(node, node.Labels[guard.LabelTenantPool])
	candidate.State = &nss.Spec
	// Keys are released on the node's whole evidence, its DRA devices
	// included, also to a pod that takes GPUs only through claims: the
	// broker does not judge the devices a pod's claims hold.
	req := &wire.EvaluateRequest{Pod: wire.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Tenant: wire.TenantOf(id.Tenant), Policy: wire.PolicyOf(id.Policy),
		Nodes: []wire.Node{candidate}}
	ev := b.opts.Evaluator.Evaluate(req)
	switch {
	case ev.Pod.Decision != guard.DecisionAllow:
		return pod, &refusal{status: http.StatusForbidden, reasons: ev.Pod.Reasons, detail: join(ev.Pod.Message, id.Note)}
	case len(ev.Results) != 1:
		return pod, unavailable("the evaluator gave %d results for one node", len(ev.Results))
	case ev.Results[0].Decision != guard.DecisionAllow:
		res := ev.Results[0]
		return pod, &refusal{status: http.StatusForbidden, reasons: res.Reasons, detail: fmt.Sprintf("%s on node %s: %s", res.Decision, node.Name, res.Message)}
	case slices.Contains(ev.Results[0].Reasons, guard.ReasonUnguardedNode):
		// Confinement Any allows a node in no pool without judging its
		// evidence; a key is released only on evidence that was judged.
		return pod, refuse(http.StatusForbidden, guard.ReasonUnguardedNode, "node %s is in no pool: the evaluator allows it under confinement Any without judging its evidence, and keys are released only on judged evidence", node.Name)
	}
	return pod, nil
}

// release finds the tenant's key and seals it to the session's key.
func (b *Broker) release(ctx context.Context, sess *session, who *identity, tenant, path string) ([]byte, *refusal) {
	var list v1alpha1.KeyReleasePolicyList
	if err := b.opts.Cache.List(ctx, &list); err != nil {
		return nil, unavailable("listing KeyReleasePolicies: %v", err)
	}
	var ref *v1alpha1.KeySecretReference
	for i := range list.Items {
		p := &list.Items[i].Spec
		if p.TenantID != tenant || (len(p.ServiceAccounts) > 0 && !slices.Contains(p.ServiceAccounts, who.namespace+"/"+who.serviceAccount)) {
			continue
		}
		for j := range p.Keys {
			if p.Keys[j].Resource == path {
				ref = &p.Keys[j].SecretRef
			}
		}
	}
	if ref == nil {
		return nil, refuse(http.StatusForbidden, guard.ReasonKeyNotOwned, "no KeyReleasePolicy of tenant %s gives %s to service account %s/%s", tenant, path, who.namespace, who.serviceAccount)
	}
	key, err := b.opts.Keys.Key(ctx, *ref)
	switch {
	case errors.Is(err, ErrKeyNotFound):
		return nil, refuse(http.StatusNotFound, guard.ReasonKeyUnavailable, "%v", err)
	case err != nil:
		return nil, &refusal{status: http.StatusServiceUnavailable, reasons: []guard.Reason{guard.ReasonKeyUnavailable}, detail: err.Error()}
	}
	body, err := seal(key, sess.pubKey, sess.alg)
	if err != nil {
		return nil, &refusal{status: http.StatusInternalServerError, detail: err.Error()}
	}
	return body, nil
}

// event records the decision on the pod.
func (b *Broker) event(pod *corev1.Pod, rec *Record, f *refusal) {
	if b.opts.Events == nil || pod == nil {
		return
	}
	// Events of one pod, reason and action are one series, whatever their
	// note: the action tells an attestation from a key, and a refusal's
	// code one refusal from another.
	what, action := "attestation", "Attest"
	if rec.Key != "" {
		what, action = "key "+rec.Key, "FetchKey"
	}
	if f == nil {
		b.opts.Events.Eventf(pod, nil, corev1.EventTypeNormal, guard.EventReasonKeyReleased, action,
			"%s granted on node %s", what, rec.Node)
		return
	}
	b.opts.Events.Eventf(pod, nil, corev1.EventTypeWarning, guard.EventReasonKeyRefused, action+":"+string(firstReason(f)),
		"%s refused on node %s: %s (%s)", what, rec.Node, reasonsOf(f), f.detail)
}

// record writes the audit line of a decision about a pod.
func (b *Broker) record(rec *Record, f *refusal, released string) {
	if b.opts.Audit == nil || (rec.Pod == "" && f != nil && f.status == http.StatusBadRequest) {
		return
	}
	rec.Time = b.opts.Clock.Now().UTC()
	rec.Decision, rec.Message = DecisionReleased, released
	if f != nil {
		rec.Decision, rec.Reasons, rec.Message = DecisionRefused, f.reasons, f.detail
	}
	if err := b.opts.Audit.Write(rec); err != nil {
		b.opts.Log.Error(err, "audit")
	}
}

// answer writes a refusal as problem details and counts it.
func (b *Broker) answer(w http.ResponseWriter, step string, f *refusal) {
	result, reason := "refused", reasonsOf(f)
	if f.status >= 500 {
		result = "error"
	}
	requestsTotal.WithLabelValues(step, result, string(firstReason(f))).Inc()
	p := Problem{Type: ProblemType("request"), Detail: f.detail}
	if len(f.reasons) > 0 {
		p.Type, p.Reason = ProblemType(string(f.reasons[0])), reason
	} else if f.status >= 500 {
		p.Type = ProblemType("unavailable")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	writeJSON(w, f.status, p)
}

func firstReason(f *refusal) guard.Reason {
	if len(f.reasons) == 0 {
		return "NONE"
	}
	return f.reasons[0]
}

func reasonsOf(f *refusal) string {
	if len(f.reasons) == 0 {
		return "no decision"
	}
	s := make([]string, len(f.reasons))
	for i, r := range f.reasons {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// decodeJSON decodes a JSON request body strictly.
func decodeJSON(r *http.Request, v any) *refusal {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &refusal{status: http.StatusUnsupportedMediaType, detail: "the body must be application/json"}
	}
	if err := decodeStrict(r.Body, v); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

func teeOf(nss *v1alpha1.NodeSecurityState) string {
	if nss.Spec.TEE == nil || nss.Spec.TEE.Type == "" {
		return "no TEE"
	}
	return string(nss.Spec.TEE.Type)
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}
