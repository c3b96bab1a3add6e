package kbs

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// flow is a client's run: auth, attest, then one resource request. Zero
// fields take the default: tee snp, the acme pod's token, an EC P-256 key,
// the session's nonce, acme's key.
type flow struct {
	// before runs once the world is built, before auth.
	before   func(w *world)
	tee      string
	token    string
	key      keyKind
	nonce    string
	resource string
	// between runs after a successful attest, before the resource request.
	between func(w *world)
}

// run plays the flow and returns the first answer that is not a success,
// or the resource's.
func (w *world) run(c *kbsClient, fl flow) reply {
	w.t.Helper()
	if fl.tee == "" {
		fl.tee = "snp"
	}
	if fl.token == "" {
		fl.token = tokAcme
	}
	if fl.key == nil {
		fl.key = ecKey
	}
	if fl.resource == "" {
		fl.resource = acmeKey
	}
	if fl.before != nil {
		fl.before(w)
	}
	fl.key(w.t, c)
	if r := c.auth(fl.tee); r.status != http.StatusOK {
		return r
	}
	if r := c.attest(fl.token, fl.nonce); r.status != http.StatusNoContent {
		return r
	}
	if fl.between != nil {
		fl.between(w)
	}
	return c.resource(fl.resource)
}

// record is an expected audit record.
func record(tenant, ns, pod, node, decision, key string, reasons ...guard.Reason) Record {
	return Record{Decision: decision, Reasons: reasons, Tenant: tenant, Namespace: ns, Pod: pod, Node: node, Key: key, Peer: "127.0.0.1"}
}

// withoutTenant is a record of a refusal before the tenant was resolved.
func withoutTenant(r Record) Record {
	r.Tenant = ""
	return r
}

// anonymous is a record of a refusal before a token named a pod.
func anonymous(reasons ...guard.Reason) Record {
	return Record{Decision: DecisionRefused, Reasons: reasons, Peer: "127.0.0.1"}
}

func setToken(token string, mutate func(*authenticationv1.TokenReviewStatus)) func(*world) {
	return func(w *world) {
		st := tokenStatus(acmeNS, acmeSA, acmePod, acmePodUID, acmeNode, acmeNodeUID)
		mutate(&st)
		w.tokens.set(token, st)
	}
}

func TestBroker(t *testing.T) {
	var (
		attested    = released("attestation", acmeNode)
		attestedRec = acmeRecord(DecisionReleased, "")
		keyWhat     = "key " + acmeKey
		refusedAt   = func(reasons string) string { return refused("attestation", acmeNode, reasons) }
		refusedKey  = func(reasons string) string { return refused(keyWhat, acmeNode, reasons) }
		attRefused  = func(reasons ...guard.Reason) Record { return acmeRecord(DecisionRefused, "", reasons...) }
		keyRefused  = func(reasons ...guard.Reason) Record { return acmeRecord(DecisionRefused, acmeKey, reasons...) }
	)
	cases := []struct {
		name    string
		fixture func(*fixtures)
		options func(*Options)
		flow    flow
		// run replaces the flow.
		run func(w *world, c *kbsClient) reply

		step   string
		status int
		// reason is the problem's reason; when empty, ptype is the
		// problem's type (urn:xila-guard:kbs:<ptype>).
		reason string
		ptype  string
		// key is the plaintext released, with the JWE algorithm alg.
		key     []byte
		alg     jose.KeyAlgorithm
		events  []string
		records []Record
		// check checks more.
		check func(t *testing.T, w *world)
	}{
		{
			name: "released, EC P-256", step: "resource", status: http.StatusOK, key: acmeSecret32, alg: jose.ECDH_ES_A256KW,
			events:  []string{attested, released(keyWhat, acmeNode)},
			records: []Record{attestedRec, acmeRecord(DecisionReleased, acmeKey)},
		},
		{
			name: "released, RSA 2048", flow: flow{key: rsaKey(2048)}, step: "resource", status: http.StatusOK, key: acmeSecret32, alg: jose.RSA_OAEP_256,
			events:  []string{attested, released(keyWhat, acmeNode)},
			records: []Record{attestedRec, acmeRecord(DecisionReleased, acmeKey)},
		},
		{
			name: "released, globex's own key to its pod", flow: flow{token: tokGlobex, resource: globexKey},
			step: "resource", status: http.StatusOK, key: globexBytes, alg: jose.ECDH_ES_A256KW,
			events: []string{released("attestation", globexNode), released("key "+globexKey, globexNode)},
			records: []Record{record("globex", globexNS, globexPod, globexNode, DecisionReleased, ""),
				record("globex", globexNS, globexPod, globexNode, DecisionReleased, globexKey)},
		},
		{
			name:    "released, to the pod's service account that serviceAccounts lists",
			fixture: func(f *fixtures) { f.acmeKeys.Spec.ServiceAccounts = []string{"acme-ml/other", acmeNS + "/" + acmeSA} },
			step:    "resource", status: http.StatusOK, key: acmeSecret32, alg: jose.ECDH_ES_A256KW,
			events:  []string{attested, released(keyWhat, acmeNode)},
			records: []Record{attestedRec, acmeRecord(DecisionReleased, acmeKey)},
		},
		{
			name: "released, Options.PeerAddress gives the pod's address",
			fixture: func(f *fixtures) {
				f.acmePod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
			},
			options: func(o *Options) { o.PeerAddress = func(*http.Request) string { return "10.0.0.7" } },
			step:    "resource", status: http.StatusOK, key: acmeSecret32, alg: jose.ECDH_ES_A256KW,
			events: []string{attested, released(keyWhat, acmeNode)},
			records: func() []Record {
				a, k := attestedRec, acmeRecord(DecisionReleased, acmeKey)
				a.Peer, k.Peer = "10.0.0.7", "10.0.0.7"
				return []Record{a, k}
			}(),
		},

		// Sessions.
		{
			name: "resource without a cookie",
			run:  func(w *world, c *kbsClient) reply { return c.resource(acmeKey) },
			step: "resource", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
		},
		{
			name: "attest without a cookie",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				return c.attest(tokAcme, "bm9uY2U")
			},
			step: "attest", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
			check: func(t *testing.T, w *world) {
				if n := w.tokens.count(); n != 0 {
					t.Errorf("%d token reviews; want none without a session", n)
				}
			},
		},
		{
			name: "unknown session",
			run: func(w *world, c *kbsClient) reply {
				return w.run(c, flow{between: func(*world) { c.cookie = random() }})
			},
			step: "resource", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
			events: []string{attested}, records: []Record{attestedRec},
		},
		{
			name: "resource before attest",
			run: func(w *world, c *kbsClient) reply {
				if r := c.auth("snp"); r.status != http.StatusOK {
					w.t.Fatalf("auth: %d %s", r.status, r.body)
				}
				return c.resource(acmeKey)
			},
			step: "resource", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
		},
		{
			name: "second attest on the same session",
			run: func(w *world, c *kbsClient) reply {
				var second reply
				w.run(c, flow{between: func(*world) {
					w.tokens.set("token-2", tokenStatus(globexNS, globexSA, globexPod, globexPodUID, globexNode, globexNodeUID))
					second = c.attest("token-2", "")
				}})
				return second
			},
			step: "attest", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
			// The resource request after the refused second attest still
			// gets the key of the identity that attested first.
			events:  []string{attested, released(keyWhat, acmeNode)},
			records: []Record{attestedRec, acmeRecord(DecisionReleased, acmeKey)},
		},
		{
			name: "session expired between attest and resource",
			flow: flow{between: func(w *world) { w.clock.Step(30 * time.Minute) }},
			step: "resource", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
			events: []string{attested}, records: []Record{attestedRec},
		},
		{
			// The session (TTL 30m) is alive; the evidence, 31 minutes old
			// by then, is judged stale.
			name: "session alive just before its TTL",
			flow: flow{between: func(w *world) { w.clock.Step(30*time.Minute - time.Second) }},
			step: "resource", status: http.StatusForbidden, reason: "EVIDENCE_STALE",
			events:  []string{attested, refusedKey("EVIDENCE_STALE")},
			records: []Record{attestedRec, keyRefused(guard.ReasonEvidenceStale)},
		},
		{
			name: "session expired before attest",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				c.auth("snp")
				w.clock.Step(time.Hour)
				return c.attest(tokAcme, "")
			},
			step: "attest", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
		},
		{
			name: "runtime-data nonce is not the session's", flow: flow{nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
			step: "attest", status: http.StatusUnauthorized, reason: "SESSION_INVALID",
			records: []Record{anonymous(guard.ReasonSessionInvalid)},
			check: func(t *testing.T, w *world) {
				if n := w.tokens.count(); n != 0 {
					t.Errorf("%d token reviews; want none for a wrong nonce", n)
				}
			},
		},

		// tee-pubkey. A malformed attestation names no pod yet and is not
		// audited.
		{
			name: "tee-pubkey RSA 1024", flow: flow{key: rsaKey(1024)},
			step: "attest", status: http.StatusBadRequest, reason: "PUBKEY_INVALID",
		},
		{
			name: "tee-pubkey symmetric oct key", flow: flow{key: octKey},
			step: "attest", status: http.StatusBadRequest, reason: "PUBKEY_INVALID",
		},
		{
			name: "tee-pubkey is a private key", flow: flow{key: privateKey},
			step: "attest", status: http.StatusBadRequest, reason: "PUBKEY_INVALID",
		},

		// Tokens.
		{
			name: "token not authenticated", flow: flow{token: "forged"},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
		},
		{
			name: "token for another audience",
			flow: flow{before: setToken(tokAcme, func(st *authenticationv1.TokenReviewStatus) {
				st.Audiences = []string{"https://kubernetes.default.svc"}
			})},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
		},
		{
			name: "token without pod claims",
			flow: flow{before: setToken(tokAcme, func(st *authenticationv1.TokenReviewStatus) {
				delete(st.User.Extra, extraPodName)
				delete(st.User.Extra, extraPodUID)
			})},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
		},
		{
			name: "token without node claims",
			flow: flow{before: setToken(tokAcme, func(st *authenticationv1.TokenReviewStatus) { delete(st.User.Extra, extraNodeUID) })},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
		},
		{
			name: "token of a user, not a service account",
			flow: flow{before: setToken(tokAcme, func(st *authenticationv1.TokenReviewStatus) { st.User.Username = "alice" })},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
		},
		{
			name: "empty token",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				c.auth("snp")
				return c.attest("", "")
			},
			step: "attest", status: http.StatusUnauthorized, reason: "TOKEN_INVALID",
			records: []Record{anonymous(guard.ReasonTokenInvalid)},
			check: func(t *testing.T, w *world) {
				if n := w.tokens.count(); n != 0 {
					t.Errorf("%d token reviews of an empty token; want none", n)
				}
			},
		},
		{
			name: "TokenReviewer fails",
			flow: flow{before: func(w *world) {
				w.tokens.mu.Lock()
				w.tokens.err = errors.New("tokenreviews: connection refused")
				w.tokens.mu.Unlock()
			}},
			step: "attest", status: http.StatusServiceUnavailable, ptype: "unavailable",
			records: []Record{anonymous()},
		},

		// The pod.
		{
			name: "pod deleted", fixture: func(f *fixtures) { f.acmePod = nil },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			// There is no pod to record an Event on.
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod of the same name with another UID", fixture: func(f *fixtures) { f.acmePod.UID = "pod-uid-other" },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			// The Event would land on another pod than the token's.
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod on another node than the token's", fixture: func(f *fixtures) { f.acmePod.Spec.NodeName = globexNode },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			events:  []string{refusedAt("POD_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod finished", fixture: func(f *fixtures) { f.acmePod.Status.Phase = corev1.PodSucceeded },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			events:  []string{refusedAt("POD_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod failed", fixture: func(f *fixtures) { f.acmePod.Status.Phase = corev1.PodFailed },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			events:  []string{refusedAt("POD_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod being deleted",
			fixture: func(f *fixtures) {
				f.acmePod.DeletionTimestamp = &metav1.Time{Time: epoch}
				f.acmePod.Finalizers = []string{"example.com/hold"}
			},
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			events:  []string{refusedAt("POD_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name: "pod runs as another service account", fixture: func(f *fixtures) { f.acmePod.Spec.ServiceAccountName = "default" },
			step: "attest", status: http.StatusForbidden, reason: "POD_MISMATCH",
			events:  []string{refusedAt("POD_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPodMismatch))},
		},
		{
			name:    "request from another address than the pod's",
			fixture: func(f *fixtures) { f.acmePod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}} },
			step:    "attest", status: http.StatusForbidden, reason: "PEER_MISMATCH",
			events:  []string{refusedAt("PEER_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPeerMismatch))},
		},
		{
			name:    "pod with no IP on record yet",
			fixture: func(f *fixtures) { f.acmePod.Status.PodIPs = nil; f.acmePod.Status.PodIP = "" },
			step:    "attest", status: http.StatusServiceUnavailable, ptype: "unavailable",
			events:  []string{refusedAt("no decision")},
			records: []Record{withoutTenant(attRefused())},
		},
		{
			name:    "pod on the host network",
			fixture: func(f *fixtures) { f.acmePod.Spec.HostNetwork = true },
			step:    "attest", status: http.StatusForbidden, reason: "PEER_MISMATCH",
			events:  []string{refusedAt("PEER_MISMATCH")},
			records: []Record{withoutTenant(attRefused(guard.ReasonPeerMismatch))},
		},
		{
			name: "pod moved off the address after attest",
			flow: flow{between: func(w *world) {
				pod := &corev1.Pod{}
				if err := w.client.Get(context.Background(), client.ObjectKey{Namespace: acmeNS, Name: acmePod}, pod); err != nil {
					w.t.Fatal(err)
				}
				pod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.8"}}
				if err := w.client.Status().Update(context.Background(), pod); err != nil {
					w.t.Fatal(err)
				}
			}},
			step: "resource", status: http.StatusForbidden, reason: "PEER_MISMATCH",
			events:  []string{attested, refusedKey("PEER_MISMATCH")},
			records: []Record{attestedRec, withoutTenant(keyRefused(guard.ReasonPeerMismatch))},
		},

		// The node and its evidence.
		{
			name: "node replaced: same name, another UID", fixture: func(f *fixtures) { f.acmeNode.UID = "node-uid-new" },
			step: "attest", status: http.StatusForbidden, reason: "NODE_CHANGED",
			events:  []string{refusedAt("NODE_CHANGED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonNodeChanged))},
		},
		{
			name: "node deleted", fixture: func(f *fixtures) { f.acmeNode = nil },
			step: "attest", status: http.StatusForbidden, reason: "NODE_CHANGED",
			events:  []string{refusedAt("NODE_CHANGED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonNodeChanged))},
		},
		{
			name: "no bound-evidence annotation", fixture: func(f *fixtures) { f.acmePod.Annotations = nil },
			step: "attest", status: http.StatusForbidden, reason: "BINDING_UNRECORDED",
			events:  []string{refusedAt("BINDING_UNRECORDED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonBindingUnrecorded))},
		},
		{
			name: "pod bound against another incarnation", fixture: func(f *fixtures) { f.acmeState.Spec.Incarnation = "inc-2" },
			step: "attest", status: http.StatusForbidden, reason: "NODE_CHANGED",
			events:  []string{refusedAt("NODE_CHANGED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonNodeChanged))},
		},
		{
			name: "evidence of another node UID", fixture: func(f *fixtures) { f.acmeState.Spec.NodeUID = "node-uid-old" },
			step: "attest", status: http.StatusForbidden, reason: "NODE_CHANGED",
			events:  []string{refusedAt("NODE_CHANGED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonNodeChanged))},
		},
		{
			name: "incarnation changed after attest",
			flow: flow{between: func(w *world) {
				nss := &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: acmeNode}}
				w.update(nss, func() { nss.Spec.Incarnation = "inc-2" })
			}},
			step: "resource", status: http.StatusForbidden, reason: "NODE_CHANGED",
			events:  []string{attested, refusedKey("NODE_CHANGED")},
			records: []Record{attestedRec, withoutTenant(keyRefused(guard.ReasonNodeChanged))},
		},
		{
			name: "no NodeSecurityState", fixture: func(f *fixtures) { f.acmeState = nil },
			step: "attest", status: http.StatusForbidden, reason: "EVIDENCE_MISSING",
			events:  []string{refusedAt("EVIDENCE_MISSING")},
			records: []Record{withoutTenant(attRefused(guard.ReasonEvidenceMissing))},
		},
		{
			// The lab profile would accept mock evidence: the broker's own
			// check refuses it.
			name: "evidence source mock", fixture: func(f *fixtures) { f.acmeState.Spec.Source = v1alpha1.SourceMock },
			step: "attest", status: http.StatusForbidden, reason: "EVIDENCE_NOT_ATTESTED",
			events:  []string{refusedAt("EVIDENCE_NOT_ATTESTED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonEvidenceNotAttested))},
		},
		{
			name: "evidence stale by the resource request",
			flow: flow{between: func(w *world) { w.clock.Step(10 * time.Minute) }},
			step: "resource", status: http.StatusForbidden, reason: "EVIDENCE_STALE",
			events:  []string{attested, refusedKey("EVIDENCE_STALE")},
			records: []Record{attestedRec, keyRefused(guard.ReasonEvidenceStale)},
		},
		{
			name: "attestation failed",
			fixture: func(f *fixtures) {
				f.acmeState.Spec.TEE.Attestation.Verdict = v1alpha1.AttestationFailed
				f.acmeState.Spec.TEE.Attestation.Reason = guard.ReasonTCBOutOfDate
			},
			step: "attest", status: http.StatusForbidden, reason: "ATTESTATION_FAILED",
			events:  []string{refusedAt("ATTESTATION_FAILED")},
			records: []Record{attRefused(guard.ReasonAttestationFailed)},
		},
		{
			name: "measurement not allowed",
			fixture: func(f *fixtures) {
				f.acmeState.Spec.TEE.Measurement = v1alpha1.Measurement("sha384:" + strings.Repeat("b", 96))
			},
			step: "attest", status: http.StatusForbidden, reason: "MEASUREMENT_NOT_ALLOWED",
			events:  []string{refusedAt("MEASUREMENT_NOT_ALLOWED")},
			records: []Record{attRefused(guard.ReasonMeasurementNotAllowed)},
		},
		{
			name: "node in another tenant's pool",
			fixture: func(f *fixtures) {
				f.acmeNode.Labels[guard.LabelTenantPool] = "globex"
			},
			step: "attest", status: http.StatusForbidden, reason: "TENANT_MISMATCH",
			events:  []string{refusedAt("TENANT_MISMATCH")},
			records: []Record{attRefused(guard.ReasonTenantMismatch)},
		},
		{
			// Confinement Any lets the evaluator allow a node in no pool
			// without reading its evidence; a key is released only on
			// evidence that was judged.
			name: "node in no pool, under confinement Any, with failed attestation",
			fixture: func(f *fixtures) {
				f.policy.Spec.Confinement = v1alpha1.ConfinementAny
				f.acmeNode.Labels = nil
				f.acmeState.Spec.TEE.Attestation.Verdict = v1alpha1.AttestationFailed
			},
			step: "attest", status: http.StatusForbidden, reason: "UNGUARDED_NODE",
			events:  []string{refusedAt("UNGUARDED_NODE")},
			records: []Record{attRefused(guard.ReasonUnguardedNode)},
		},
		{
			name: "client says tdx, the node is SEV-SNP", flow: flow{tee: "tdx"},
			step: "attest", status: http.StatusForbidden, reason: "EVIDENCE_NOT_ATTESTED",
			events:  []string{refusedAt("EVIDENCE_NOT_ATTESTED")},
			records: []Record{withoutTenant(attRefused(guard.ReasonEvidenceNotAttested))},
		},
		{
			name: "namespace labelled, no TenantBinding", fixture: func(f *fixtures) { f.acmeBinding = nil },
			step: "attest", status: http.StatusForbidden, reason: "TENANT_UNRESOLVED,NO_POLICY",
			events:  []string{refusedAt("TENANT_UNRESOLVED,NO_POLICY")},
			records: []Record{withoutTenant(attRefused(guard.ReasonTenantUnresolved, guard.ReasonNoPolicy))},
		},

		// The key.
		{
			name: "pod of another tenant asks for acme's key", flow: flow{token: tokGlobex, resource: acmeKey},
			step: "resource", status: http.StatusForbidden, reason: "KEY_NOT_OWNED",
			events: []string{released("attestation", globexNode), refused(keyWhat, globexNode, "KEY_NOT_OWNED")},
			records: []Record{record("globex", globexNS, globexPod, globexNode, DecisionReleased, ""),
				record("globex", globexNS, globexPod, globexNode, DecisionRefused, acmeKey, guard.ReasonKeyNotOwned)},
		},
		{
			name: "resource no policy lists", flow: flow{resource: "acme/model/other"},
			step: "resource", status: http.StatusForbidden, reason: "KEY_NOT_OWNED",
			events:  []string{attested, refused("key acme/model/other", acmeNode, "KEY_NOT_OWNED")},
			records: []Record{attestedRec, acmeRecord(DecisionRefused, "acme/model/other", guard.ReasonKeyNotOwned)},
		},
		{
			name:    "serviceAccounts excludes the pod's",
			fixture: func(f *fixtures) { f.acmeKeys.Spec.ServiceAccounts = []string{acmeNS + "/default"} },
			step:    "resource", status: http.StatusForbidden, reason: "KEY_NOT_OWNED",
			events:  []string{attested, refusedKey("KEY_NOT_OWNED")},
			records: []Record{attestedRec, keyRefused(guard.ReasonKeyNotOwned)},
		},
		{
			name:    "serviceAccounts names the account without its namespace",
			fixture: func(f *fixtures) { f.acmeKeys.Spec.ServiceAccounts = []string{acmeSA} },
			step:    "resource", status: http.StatusForbidden, reason: "KEY_NOT_OWNED",
			events:  []string{attested, refusedKey("KEY_NOT_OWNED")},
			records: []Record{attestedRec, keyRefused(guard.ReasonKeyNotOwned)},
		},
		{
			name: "policy lists the key, the Secret is missing", fixture: func(f *fixtures) { f.acmeSecret = nil },
			step: "resource", status: http.StatusNotFound, reason: "KEY_UNAVAILABLE",
			events:  []string{attested, refusedKey("KEY_UNAVAILABLE")},
			records: []Record{attestedRec, keyRefused(guard.ReasonKeyUnavailable)},
		},
		{
			name: "the Secret lacks the key", fixture: func(f *fixtures) { f.acmeSecret.Data = map[string][]byte{"other": []byte("x")} },
			step: "resource", status: http.StatusNotFound, reason: "KEY_UNAVAILABLE",
			events:  []string{attested, refusedKey("KEY_UNAVAILABLE")},
			records: []Record{attestedRec, keyRefused(guard.ReasonKeyUnavailable)},
		},
		{
			name: "the key store fails",
			options: func(o *Options) {
				o.Keys = keyStoreFunc(func(context.Context, v1alpha1.KeySecretReference) ([]byte, error) {
					return nil, errors.New("kms: deadline exceeded")
				})
			},
			step: "resource", status: http.StatusServiceUnavailable, reason: "KEY_UNAVAILABLE",
			events:  []string{attested, refusedKey("KEY_UNAVAILABLE")},
			records: []Record{attestedRec, keyRefused(guard.ReasonKeyUnavailable)},
		},
		{
			name: "the Live reader fails between attest and resource",
			flow: flow{between: func(w *world) { w.failLive.Store(true) }},
			step: "resource", status: http.StatusServiceUnavailable, ptype: "unavailable",
			// Nothing was read, so there is no pod for an Event.
			events:  []string{attested},
			records: []Record{attestedRec, withoutTenant(keyRefused())},
		},
		{
			name: "the Live reader fails at attest",
			flow: flow{before: func(w *world) { w.failLive.Store(true) }},
			step: "attest", status: http.StatusServiceUnavailable, ptype: "unavailable",
			records: []Record{withoutTenant(attRefused())},
		},

		// Malformed requests are neither audited nor recorded as Events.
		{
			name: "auth with the wrong content type",
			run: func(w *world, c *kbsClient) reply {
				return c.do("auth", http.MethodPost, PathAuth, "text/plain", mustJSON(w.t, Request{Version: ProtocolVersion, TEE: "snp"}))
			},
			step: "auth", status: http.StatusUnsupportedMediaType, ptype: "request",
		},
		{
			name: "auth with a charset is application/json",
			run: func(w *world, c *kbsClient) reply {
				return c.do("auth", http.MethodPost, PathAuth, "application/json; charset=utf-8", mustJSON(w.t, Request{Version: ProtocolVersion, TEE: "snp"}))
			},
			step: "auth", status: http.StatusOK,
		},
		{
			name: "attest with the wrong content type",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				c.auth("snp")
				att := Attestation{RuntimeData: RuntimeData{Nonce: c.nonce, TEEPubKey: c.pub}, TEEEvidence: Evidence{Token: tokAcme}}
				return c.do("attest", http.MethodPost, PathAttest, "application/x-www-form-urlencoded", mustJSON(w.t, att))
			},
			step: "attest", status: http.StatusUnsupportedMediaType, ptype: "request",
		},
		{
			name: "auth with an unknown field",
			run: func(w *world, c *kbsClient) reply {
				return c.do("auth", http.MethodPost, PathAuth, "application/json", []byte(`{"version":"0.1.0","tee":"snp","nonce":"x"}`))
			},
			step: "auth", status: http.StatusBadRequest, ptype: "request",
		},
		{
			name: "auth with trailing data",
			run: func(w *world, c *kbsClient) reply {
				return c.do("auth", http.MethodPost, PathAuth, "application/json", []byte(`{"version":"0.1.0","tee":"snp"}{}`))
			},
			step: "auth", status: http.StatusBadRequest, ptype: "request",
		},
		{
			name: "attest with an unknown field",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				c.auth("snp")
				body := `{"runtime-data":{"nonce":"` + c.nonce + `","tee-pubkey":` + string(c.pub) + `},"tee-evidence":{"token":"` + tokAcme + `","quote":"x"}}`
				return c.do("attest", http.MethodPost, PathAttest, "application/json", []byte(body))
			},
			step: "attest", status: http.StatusBadRequest, ptype: "request",
			check: func(t *testing.T, w *world) {
				if n := w.tokens.count(); n != 0 {
					t.Errorf("%d token reviews; want none for a malformed attestation", n)
				}
			},
		},
		{
			name: "attest with a body over the limit",
			run: func(w *world, c *kbsClient) reply {
				ecKey(w.t, c)
				c.auth("snp")
				return c.attest(strings.Repeat("t", maxBody), "")
			},
			step: "attest", status: http.StatusBadRequest, ptype: "request",
		},
		{
			name: "auth with tee sgx", flow: flow{tee: "sgx"},
			step: "auth", status: http.StatusBadRequest, ptype: "request",
		},
		{
			name: "auth with protocol version 1",
			run: func(w *world, c *kbsClient) reply {
				return c.do("auth", http.MethodPost, PathAuth, "application/json", mustJSON(w.t, Request{Version: "1.0.0", TEE: "snp"}))
			},
			step: "auth", status: http.StatusBadRequest, ptype: "request",
		},
		{
			name:    "max sessions reached",
			options: func(o *Options) { o.MaxSessions = 2 },
			run: func(w *world, c *kbsClient) reply {
				for range 2 {
					if r := w.newClient().auth("snp"); r.status != http.StatusOK {
						w.t.Fatalf("auth: %d %s", r.status, r.body)
					}
				}
				return c.auth("snp")
			},
			step: "auth", status: http.StatusServiceUnavailable, ptype: "unavailable",
			check: func(t *testing.T, w *world) {
				if r := w.newClient().auth("snp"); r.status != http.StatusServiceUnavailable {
					t.Errorf("auth before the sessions expire: %d, want 503", r.status)
				}
				w.clock.Step(30 * time.Minute)
				if r := w.newClient().auth("snp"); r.status != http.StatusOK {
					t.Errorf("auth once the sessions expired: %d %s, want 200", r.status, r.body)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.fixture, tc.options)
			c := w.newClient()
			var r reply
			if tc.run != nil {
				r = tc.run(w, c)
			} else {
				r = w.run(c, tc.flow)
			}
			if r.step != tc.step || r.status != tc.status {
				t.Fatalf("%s answered %d %s; want %s to answer %d", r.step, r.status, r.body, tc.step, tc.status)
			}
			switch {
			case tc.status == http.StatusOK && tc.step == "resource":
				if got := c.open(r, tc.alg); !bytes.Equal(got, tc.key) {
					t.Errorf("released %q, want %q", got, tc.key)
				}
			case tc.status >= 400:
				p := r.problem(t)
				wantType := ProblemType(tc.ptype)
				if tc.reason != "" {
					first, _, _ := strings.Cut(tc.reason, ",")
					wantType = ProblemType(first)
				}
				if p.Reason != tc.reason || p.Type != wantType {
					t.Errorf("problem %+v; want reason %q, type %s", p, tc.reason, wantType)
				}
			}
			checkEvents(t, w.events(), tc.events)
			checkRecords(t, w.records(), tc.records)
			if tc.check != nil {
				tc.check(t, w)
			}
		})
	}
}

// TestBrokerConcurrentAttests checks that of two attestations on
// one session racing, exactly one succeeds.
func TestBrokerConcurrentAttests(t *testing.T) {
	w := newWorld(t, nil, nil)
	c := w.newClient()
	ecKey(t, c)
	if r := c.auth("snp"); r.status != http.StatusOK {
		t.Fatalf("auth: %d %s", r.status, r.body)
	}
	const n = 8
	statuses := make(chan int, n)
	for range n {
		go func() {
			att := Attestation{RuntimeData: RuntimeData{Nonce: c.nonce, TEEPubKey: c.pub}, TEEEvidence: Evidence{Token: tokAcme}}
			req, _ := http.NewRequest(http.MethodPost, w.srv.URL+PathAttest, bytes.NewReader(mustJSON(t, att)))
			req.Header.Set("Content-Type", "application/json")
			req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
			resp, err := w.srv.Client().Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	ok := 0
	for range n {
		switch s := <-statuses; s {
		case http.StatusNoContent:
			ok++
		case http.StatusUnauthorized:
		default:
			t.Errorf("attest: %d, want 204 or 401", s)
		}
	}
	if ok != 1 {
		t.Errorf("%d attestations succeeded on one session; want exactly 1", ok)
	}
	if r := c.resource(acmeKey); r.status != http.StatusOK {
		t.Fatalf("resource: %d %s", r.status, r.body)
	} else if got := c.open(r, jose.ECDH_ES_A256KW); !bytes.Equal(got, acmeSecret32) {
		t.Errorf("released %q", got)
	}
}

// TestBrokerJudgesEveryResource checks that each resource request of a
// session is judged again: released, refused while the node's evidence is
// not the pod's, released again once it is.
func TestBrokerJudgesEveryResource(t *testing.T) {
	w := newWorld(t, nil, nil)
	c := w.newClient()
	if r := w.run(c, flow{}); r.status != http.StatusOK {
		t.Fatalf("resource: %d %s", r.status, r.body)
	}
	nss := &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: acmeNode}}
	w.update(nss, func() { nss.Spec.Source = v1alpha1.SourceMock })
	if r := c.resource(acmeKey); r.status != http.StatusForbidden || r.problem(t).Reason != "EVIDENCE_NOT_ATTESTED" {
		t.Errorf("resource on mock evidence: %d %s, want 403 EVIDENCE_NOT_ATTESTED", r.status, r.body)
	}
	w.update(nss, func() { nss.Spec.Source = v1alpha1.SourceAttested })
	if r := c.resource(acmeKey); r.status != http.StatusOK {
		t.Errorf("resource on attested evidence again: %d %s, want 200", r.status, r.body)
	} else if got := c.open(r, jose.ECDH_ES_A256KW); !bytes.Equal(got, acmeSecret32) {
		t.Errorf("released %q", got)
	}
	checkEvents(t, w.events(), []string{released("attestation", acmeNode), released("key "+acmeKey, acmeNode),
		refused("key "+acmeKey, acmeNode, "EVIDENCE_NOT_ATTESTED"), released("key "+acmeKey, acmeNode)})
}

func TestNewRequiresItsReaders(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	full := func() Options {
		w := newWorld(t, nil, nil)
		return w.broker.opts
	}
	for name, drop := range map[string]func(*Options){
		"Cache": func(o *Options) { o.Cache = nil }, "Live": func(o *Options) { o.Live = nil },
		"Tokens": func(o *Options) { o.Tokens = nil }, "Keys": func(o *Options) { o.Keys = nil },
		"Evaluator": func(o *Options) { o.Evaluator = nil },
	} {
		o := full()
		drop(&o)
		if _, err := New(o); err == nil {
			t.Errorf("New without %s: no error", name)
		}
	}
	o := full()
	o.Cache, o.Live, o.Clock, o.SessionTTL, o.MaxSessions, o.PeerAddress = c, c, nil, 0, 0, nil
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if b.opts.Clock == nil || b.opts.SessionTTL != DefaultSessionTTL || b.opts.MaxSessions != DefaultMaxSessions || b.opts.PeerAddress == nil {
		t.Errorf("defaults not applied: %+v", b.opts)
	}
}

func TestPublicKey(t *testing.T) {
	ec := func(curve elliptic.Curve) *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	rsaOf := func(bits int) *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsa2048, rsa1024 := rsaOf(2048), rsaOf(1024)
	accepted := []struct {
		name string
		raw  json.RawMessage
		want jose.KeyAlgorithm
	}{
		{"EC P-256", publicJWK(t, &ec(elliptic.P256()).PublicKey, ""), jose.ECDH_ES_A256KW},
		{"EC P-384", publicJWK(t, &ec(elliptic.P384()).PublicKey, ""), jose.ECDH_ES_A256KW},
		{"EC P-521", publicJWK(t, &ec(elliptic.P521()).PublicKey, ""), jose.ECDH_ES_A256KW},
		{"EC P-256 asking for its alg", publicJWK(t, &ec(elliptic.P256()).PublicKey, "ECDH-ES+A256KW"), jose.ECDH_ES_A256KW},
		{"RSA 2048", publicJWK(t, &rsa2048.PublicKey, ""), jose.RSA_OAEP_256},
		{"RSA 2048 asking for its alg", publicJWK(t, &rsa2048.PublicKey, "RSA-OAEP-256"), jose.RSA_OAEP_256},
	}
	for _, tc := range accepted {
		k, alg, err := PublicKey(tc.raw)
		if err != nil || alg != tc.want || k == nil || !k.IsPublic() {
			t.Errorf("%s: PublicKey = %v, %s, %v; want a public key and %s", tc.name, k, alg, err, tc.want)
		}
	}
	refusedKeys := []struct {
		name, why string
		raw       json.RawMessage
	}{
		{"RSA 1024", "1024 bits", publicJWK(t, &rsa1024.PublicKey, "")},
		{"EC asking for another alg", "asks for alg ECDH-ES", publicJWK(t, &ec(elliptic.P256()).PublicKey, "ECDH-ES")},
		{"RSA asking for RSA-OAEP", "asks for alg RSA-OAEP", publicJWK(t, &rsa2048.PublicKey, "RSA-OAEP")},
		{"RSA private", "not a valid public key", publicJWK(t, rsa2048, "")},
		{"EC private", "not a valid public key", publicJWK(t, ec(elliptic.P256()), "")},
		{"oct", "not a valid public key", publicJWK(t, []byte("0123456789abcdef"), "")},
		{"Ed25519", "RSA or EC is needed", publicJWK(t, edPub, "")},
		{"EC P-224", "not a JWK", json.RawMessage(`{"kty":"EC","crv":"P-224","x":"AAAA","y":"AAAA"}`)},
		{"EC point off the curve", "not a JWK", json.RawMessage(`{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}`)},
		{"a string", "not a JWK", json.RawMessage(`"key"`)},
		{"nothing", "not a JWK", nil},
	}
	for _, tc := range refusedKeys {
		k, alg, err := PublicKey(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.why) || k != nil || alg != "" {
			t.Errorf("%s: PublicKey = %v, %q, %v; want an error saying %q", tc.name, k, alg, err, tc.why)
		}
	}
}

func TestSealOpens(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, alg, err := PublicKey(publicJWK(t, &k.PublicKey, ""))
	if err != nil {
		t.Fatal(err)
	}
	pub.KeyID = "tee-1"
	body, err := seal([]byte("secret"), pub, alg)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := jose.ParseEncrypted(string(body), []jose.KeyAlgorithm{jose.ECDH_ES_A256KW}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Header.KeyID != "tee-1" {
		t.Errorf("kid %q, want tee-1", obj.Header.KeyID)
	}
	if got, err := obj.Decrypt(k); err != nil || string(got) != "secret" {
		t.Errorf("Decrypt = %q, %v", got, err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := obj.Decrypt(other); err == nil {
		t.Error("another key decrypts the JWE")
	}
}

func TestSessions(t *testing.T) {
	now := epoch
	const ttl = 20 * time.Second // below pendingTTL: every session lives ttl
	s := newSessions(2)
	a := s.open("snp", now, ttl)
	b := s.open("tdx", now.Add(10*time.Second), ttl)
	if a == nil || b == nil || a.id == b.id || a.nonce == b.nonce || a.id == a.nonce {
		t.Fatalf("open: %+v %+v; want two sessions with their own random ID and nonce", a, b)
	}
	if s.open("snp", now, ttl) != nil {
		t.Error("a third session opened with max 2")
	}
	if got, ok := s.get(a.id, now.Add(19*time.Second)); !ok || got.tee != "snp" || got.nonce != a.nonce || got.attested {
		t.Errorf("get(a) before expiry = %+v, %v", got, ok)
	}
	if _, ok := s.get("unknown", now); ok {
		t.Error("get(unknown) found a session")
	}

	// Attest once.
	who := &identity{namespace: acmeNS, pod: acmePod}
	key := &jose.JSONWebKey{KeyID: "k"}
	if !s.attest(a.id, who, key, jose.ECDH_ES_A256KW, now.Add(ttl)) {
		t.Fatal("first attest refused")
	}
	if s.attest(a.id, &identity{namespace: "evil"}, key, jose.RSA_OAEP_256, now.Add(ttl)) {
		t.Error("second attest accepted")
	}
	if s.attest("unknown", who, key, jose.ECDH_ES_A256KW, now.Add(ttl)) {
		t.Error("attest of an unknown session accepted")
	}
	got, ok := s.get(a.id, now)
	if !ok || !got.attested || got.who != who || got.pubKey != key || got.alg != jose.ECDH_ES_A256KW {
		t.Errorf("get(a) after attest = %+v, %v", got, ok)
	}
	// get returns a copy.
	got.attested = false
	if again, _ := s.get(a.id, now); !again.attested {
		t.Error("changing get's result changed the session")
	}

	// Expiry: a expires at now+20s; the sweep on a full open removes it.
	if _, ok := s.get(a.id, now.Add(ttl)); ok {
		t.Error("get(a) at its expiry found it")
	}
	if s.len() != 1 {
		t.Errorf("len = %d after get removed the expired session, want 1", s.len())
	}
	c := s.open("snp", now.Add(20*time.Second), ttl)
	if c == nil {
		t.Fatal("open with one slot free refused")
	}
	if s.open("snp", now.Add(25*time.Second), ttl) != nil {
		t.Error("open with both sessions alive accepted")
	}
	// At now+30s b has expired: open sweeps it.
	if d := s.open("snp", now.Add(30*time.Second), ttl); d == nil {
		t.Error("open after b expired refused")
	}
	if _, ok := s.get(b.id, now.Add(30*time.Second)); ok {
		t.Error("b survived its expiry")
	}
	s.dropUnattested(c.id)
	if _, ok := s.get(c.id, now.Add(30*time.Second)); ok {
		t.Error("dropped session found")
	}
	// An attested session is not dropped by a refused second attempt.
	d := s.open("snp", now.Add(30*time.Second), ttl)
	if !s.attest(d.id, &identity{pod: "p"}, nil, "", now.Add(50*time.Second)) {
		t.Fatal("attest refused")
	}
	s.dropUnattested(d.id)
	if _, ok := s.get(d.id, now.Add(30*time.Second)); !ok {
		t.Error("an attested session was dropped")
	}
}

// TestSessionsPending: a session that has not attested lives at most
// pendingTTL whatever the TTL; attesting gives it the whole TTL.
func TestSessionsPending(t *testing.T) {
	now := epoch
	s := newSessions(4)
	left := s.open("snp", now, time.Hour)
	used := s.open("snp", now, time.Hour)
	if !s.attest(used.id, &identity{pod: "p"}, nil, "", now.Add(10*time.Second).Add(time.Hour)) {
		t.Fatal("attest refused")
	}
	if _, ok := s.get(left.id, now.Add(pendingTTL)); ok {
		t.Errorf("a session left unattested lived past %s", pendingTTL)
	}
	if _, ok := s.get(used.id, now.Add(30*time.Minute)); !ok {
		t.Error("an attested session expired before its TTL")
	}
}

func TestSecrets(t *testing.T) {
	objs := []client.Object{
		keySecret("full", []byte("k1")),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNS, Name: "empty"}, Data: map[string][]byte{"key": {}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "other-ns"}, Data: map[string][]byte{"key": []byte("k2")}},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	s := Secrets{Reader: c, Namespace: brokerNS}
	ctx := context.Background()
	if got, err := s.Key(ctx, v1alpha1.KeySecretReference{Name: "full", Key: "key"}); err != nil || string(got) != "k1" {
		t.Errorf("Key(full/key) = %q, %v; want k1", got, err)
	}
	for _, ref := range []v1alpha1.KeySecretReference{
		{Name: "missing", Key: "key"}, {Name: "full", Key: "other"}, {Name: "empty", Key: "key"}, {Name: "other-ns", Key: "key"},
	} {
		if got, err := s.Key(ctx, ref); !errors.Is(err, ErrKeyNotFound) || got != nil {
			t.Errorf("Key(%s/%s) = %q, %v; want ErrKeyNotFound", ref.Name, ref.Key, got, err)
		}
	}
	boom := errors.New("etcd is on fire")
	failing := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		},
	})
	got, err := Secrets{Reader: failing, Namespace: brokerNS}.Key(ctx, v1alpha1.KeySecretReference{Name: "full", Key: "key"})
	if !errors.Is(err, boom) || errors.Is(err, ErrKeyNotFound) || got != nil {
		t.Errorf("Key on a failing reader = %q, %v; want the reader's error, not ErrKeyNotFound", got, err)
	}
}

func TestIdentify(t *testing.T) {
	st := tokenStatus(acmeNS, acmeSA, acmePod, acmePodUID, acmeNode, acmeNodeUID)
	who, why := identify(st)
	want := identity{namespace: acmeNS, serviceAccount: acmeSA, pod: acmePod, podUID: acmePodUID, node: acmeNode, nodeUID: acmeNodeUID}
	if who == nil || *who != want || why != "" {
		t.Fatalf("identify = %+v, %q; want %+v", who, why, want)
	}
	for name, mutate := range map[string]func(*authenticationv1.TokenReviewStatus){
		"not authenticated":    func(s *authenticationv1.TokenReviewStatus) { s.Authenticated = false },
		"no audience":          func(s *authenticationv1.TokenReviewStatus) { s.Audiences = nil },
		"node username":        func(s *authenticationv1.TokenReviewStatus) { s.User.Username = "system:node:node-1" },
		"too many parts":       func(s *authenticationv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:a:b:c" },
		"two pod names":        func(s *authenticationv1.TokenReviewStatus) { s.User.Extra[extraPodName] = []string{"a", "b"} },
		"no pod uid":           func(s *authenticationv1.TokenReviewStatus) { delete(s.User.Extra, extraPodUID) },
		"no node name":         func(s *authenticationv1.TokenReviewStatus) { delete(s.User.Extra, extraNodeName) },
		"empty node uid value": func(s *authenticationv1.TokenReviewStatus) { s.User.Extra[extraNodeUID] = []string{""} },
	} {
		st := tokenStatus(acmeNS, acmeSA, acmePod, acmePodUID, acmeNode, acmeNodeUID)
		mutate(&st)
		if who, why := identify(st); who != nil || why == "" {
			t.Errorf("%s: identify = %+v, %q; want a refusal", name, who, why)
		}
	}
}

func TestRemoteAddress(t *testing.T) {
	for addr, want := range map[string]string{"10.0.0.7:443": "10.0.0.7", "[fd00::7]:443": "fd00::7", "garbage": "garbage"} {
		if got := RemoteAddress(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("RemoteAddress(%q) = %q, want %q", addr, got, want)
		}
	}
	pod := boundPod(acmeNS, acmePod, acmeSA, acmePodUID, acmeNode, acmeNodeUID)
	for addr, want := range map[string]bool{"127.0.0.1": true, "fd00::7": true, "fd00:0::7": true, "10.0.0.7": false, "": false, "garbage": false} {
		if got := hasIP(pod, addr); got != want {
			t.Errorf("hasIP(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestClient runs the package's Client against the broker.
func TestClient(t *testing.T) {
	w := newWorld(t, func(f *fixtures) { f.acmeKeys.Spec.Keys = append(f.acmeKeys.Spec.Keys, f.globexKeys.Spec.Keys...) }, nil)
	ecPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := &Client{URL: w.srv.URL + "/", HTTP: w.srv.Client()}
	for name, key := range map[string]crypto.Signer{"EC": ecPriv, "RSA": rsaPriv} {
		s, err := c.Attest(ctx, tokAcme, key)
		if err != nil {
			t.Fatalf("%s: Attest: %v", name, err)
		}
		// One session, several resources.
		for path, want := range map[string][]byte{acmeKey: acmeSecret32, globexKey: globexBytes} {
			if got, err := s.Resource(ctx, path); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: Resource(%s) = %q, %v; want %q", name, path, got, err, want)
			}
		}
		var refusal *RefusedError
		if _, err := s.Resource(ctx, "acme/model/other"); !errors.As(err, &refusal) ||
			refusal.Status != http.StatusForbidden || refusal.Problem.Reason != "KEY_NOT_OWNED" {
			t.Errorf("%s: Resource(acme/model/other) = %v; want a 403 KEY_NOT_OWNED RefusedError", name, err)
		}
	}
	var refusal *RefusedError
	if _, err := c.Attest(ctx, "forged", ecPriv); !errors.As(err, &refusal) ||
		refusal.Status != http.StatusUnauthorized || refusal.Problem.Reason != "TOKEN_INVALID" {
		t.Errorf("Attest(forged) = %v; want a 401 TOKEN_INVALID RefusedError", err)
	}
	if _, err := (&Client{URL: w.srv.URL, TEE: "sgx"}).Attest(ctx, tokAcme, ecPriv); !errors.As(err, &refusal) ||
		refusal.Status != http.StatusBadRequest || refusal.Problem.Reason != "" || !strings.Contains(refusal.Error(), "sgx") {
		t.Errorf("Attest with tee sgx = %v; want a 400 RefusedError naming sgx", err)
	}
}
