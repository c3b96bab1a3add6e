package kbs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
)

// The fixtures' names. Tenant acme runs pod acme-ml/train-0 on node-1 of
// pool acme; tenant globex runs globex-web/web-0 on node-2 of pool globex.
const (
	brokerNS = "xila-guard-system"

	acmeNS, acmePod, acmeSA, acmePodUID = "acme-ml", "train-0", "trainer", types.UID("pod-uid-train-0")
	acmeNode, acmeNodeUID               = "node-1", types.UID("node-uid-1")
	acmeKey, acmeSecret                 = "acme/model/key1", "acme-model"
	tokAcme                             = "token-train-0"

	globexNS, globexPod, globexSA, globexPodUID = "globex-web", "web-0", "web", types.UID("pod-uid-web-0")
	globexNode, globexNodeUID                   = "node-2", types.UID("node-uid-2")
	globexKey, globexSecret                     = "globex/model/key1", "globex-model"
	tokGlobex                                   = "token-web-0"

	incarnation = "inc-1"
	strict      = "strict"
)

var (
	// epoch is the fake clock's start.
	epoch        = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	measurementA = v1alpha1.Measurement("sha384:" + strings.Repeat("a", 96))
	acmeSecret32 = []byte("acme model key: 32 bytes of it!!")
	globexBytes  = []byte("globex model key")
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// fixtures are the objects of the fake API server; a case changes them,
// or sets one to nil to leave it out, before the world is built.
type fixtures struct {
	acmeNamespace, globexNamespace *corev1.Namespace
	acmeBinding, globexBinding     *v1alpha1.TenantBinding
	policy                         *v1alpha1.PlacementPolicy
	acmeNode, globexNode           *corev1.Node
	acmeState, globexState         *v1alpha1.NodeSecurityState
	acmePod, globexPod             *corev1.Pod
	acmeKeys, globexKeys           *v1alpha1.KeyReleasePolicy
	acmeSecret, globexSecret       *corev1.Secret
}

func durationOf(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func namespace(name, tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{guard.LabelTenant: tenant}}}
}

func binding(tenant, ns string) *v1alpha1.TenantBinding {
	return &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Spec: v1alpha1.TenantBindingSpec{TenantID: tenant, Namespaces: []string{ns},
			EffectivePolicyRef: &v1alpha1.PolicyReference{Name: strict}}}
}

func poolNode(name string, uid types.UID, pool string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: map[string]string{guard.LabelTenantPool: pool}}}
}

// attestedState is evidence that the strict policy allows at epoch.
func attestedState(node string, uid types.UID) *v1alpha1.NodeSecurityState {
	return &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: uid, Incarnation: incarnation, ObservedAt: metav1.NewTime(epoch.Add(-time.Minute)),
			Source: v1alpha1.SourceAttested, Complete: true,
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, Measurement: measurementA,
				Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed,
					VerifiedAt: metav1.NewTime(epoch.Add(-5 * time.Minute)), Verifier: "xila-guard-attest"}},
		}}
}

func boundPod(ns, name, sa string, uid types.UID, node string, nodeUID types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid,
			Annotations: map[string]string{guard.AnnotationBoundEvidence: guard.BoundEvidence(string(nodeUID), incarnation)}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}, {IP: "fd00::7"}}},
	}
}

func keyPolicy(tenant, resource, secret string) *v1alpha1.KeyReleasePolicy {
	return &v1alpha1.KeyReleasePolicy{ObjectMeta: metav1.ObjectMeta{Name: tenant + "-keys"},
		Spec: v1alpha1.KeyReleasePolicySpec{TenantID: tenant,
			Keys: []v1alpha1.KeyRelease{{Resource: resource, SecretRef: v1alpha1.KeySecretReference{Name: secret, Key: "key"}}}}}
}

func keySecret(name string, key []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNS, Name: name}, Data: map[string][]byte{"key": key}}
}

func newFixtures() *fixtures {
	return &fixtures{
		acmeNamespace: namespace(acmeNS, "acme"), globexNamespace: namespace(globexNS, "globex"),
		acmeBinding: binding("acme", acmeNS), globexBinding: binding("globex", globexNS),
		policy: &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: strict}, Spec: v1alpha1.PlacementPolicySpec{
			Confinement: v1alpha1.ConfinementPool,
			Evidence:    v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}, MaxAge: durationOf(10 * time.Minute)},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
				TEETypes: []v1alpha1.TEEType{v1alpha1.TEESEVSNP}, AllowedMeasurements: []v1alpha1.Measurement{measurementA},
				RequireAttestation: true, MaxAttestationAge: durationOf(time.Hour)},
		}},
		acmeNode: poolNode(acmeNode, acmeNodeUID, "acme"), globexNode: poolNode(globexNode, globexNodeUID, "globex"),
		acmeState: attestedState(acmeNode, acmeNodeUID), globexState: attestedState(globexNode, globexNodeUID),
		acmePod:   boundPod(acmeNS, acmePod, acmeSA, acmePodUID, acmeNode, acmeNodeUID),
		globexPod: boundPod(globexNS, globexPod, globexSA, globexPodUID, globexNode, globexNodeUID),
		acmeKeys:  keyPolicy("acme", acmeKey, acmeSecret), globexKeys: keyPolicy("globex", globexKey, globexSecret),
		acmeSecret: keySecret(acmeSecret, acmeSecret32), globexSecret: keySecret(globexSecret, globexBytes),
	}
}

func (f *fixtures) objects() []client.Object {
	var out []client.Object
	add := func(o client.Object, present bool) {
		if present {
			out = append(out, o)
		}
	}
	add(f.acmeNamespace, f.acmeNamespace != nil)
	add(f.globexNamespace, f.globexNamespace != nil)
	add(f.acmeBinding, f.acmeBinding != nil)
	add(f.globexBinding, f.globexBinding != nil)
	add(f.policy, f.policy != nil)
	add(f.acmeNode, f.acmeNode != nil)
	add(f.globexNode, f.globexNode != nil)
	add(f.acmeState, f.acmeState != nil)
	add(f.globexState, f.globexState != nil)
	add(f.acmePod, f.acmePod != nil)
	add(f.globexPod, f.globexPod != nil)
	add(f.acmeKeys, f.acmeKeys != nil)
	add(f.globexKeys, f.globexKeys != nil)
	add(f.acmeSecret, f.acmeSecret != nil)
	add(f.globexSecret, f.globexSecret != nil)
	return out
}

// tokenStatus is what the API server says of a bound projected token of
// the pod.
func tokenStatus(ns, sa, pod string, podUID types.UID, node string, nodeUID types.UID) authenticationv1.TokenReviewStatus {
	return authenticationv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{guard.KeyBrokerAudience},
		User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:" + ns + ":" + sa,
			UID:      "sa-uid",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{
				extraPodName: {pod}, extraPodUID: {string(podUID)},
				extraNodeName: {node}, extraNodeUID: {string(nodeUID)},
			},
		},
	}
}

// tokens is a TokenReviewer that knows some tokens.
type tokens struct {
	mu     sync.Mutex
	status map[string]authenticationv1.TokenReviewStatus
	err    error
	calls  int
}

func (r *tokens) Review(_ context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return authenticationv1.TokenReviewStatus{}, r.err
	}
	st, ok := r.status[token]
	if !ok {
		return authenticationv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}, nil
	}
	return st, nil
}

func (r *tokens) set(token string, st authenticationv1.TokenReviewStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[token] = st
}

func (r *tokens) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// keyStoreFunc is a KeyStore of a function.
type keyStoreFunc func(ctx context.Context, ref v1alpha1.KeySecretReference) ([]byte, error)

func (f keyStoreFunc) Key(ctx context.Context, ref v1alpha1.KeySecretReference) ([]byte, error) {
	return f(ctx, ref)
}

// errLive is what the Live reader returns once world.failLive is set.
var errLive = errors.New("the API server is unreachable")

// world is a broker on a fake API server, served over HTTP.
type world struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	client   client.WithWatch
	tokens   *tokens
	recorder *events.FakeRecorder
	audit    *syncBuffer
	broker   *Broker
	srv      *httptest.Server
	// failLive makes every Get of the Live reader fail.
	failLive atomic.Bool
}

// newWorld builds the world from the fixtures, after fixture changed them
// and options changed the broker's options; either may be nil.
func newWorld(t *testing.T, fixture func(*fixtures), options func(*Options)) *world {
	t.Helper()
	f := newFixtures()
	if fixture != nil {
		fixture(f)
	}
	w := &world{t: t, clock: clocktesting.NewFakeClock(epoch), recorder: events.NewFakeRecorder(32), audit: &syncBuffer{},
		tokens: &tokens{status: map[string]authenticationv1.TokenReviewStatus{
			tokAcme:   tokenStatus(acmeNS, acmeSA, acmePod, acmePodUID, acmeNode, acmeNodeUID),
			tokGlobex: tokenStatus(globexNS, globexSA, globexPod, globexPodUID, globexNode, globexNodeUID),
		}}}
	w.client = fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithIndex(&v1alpha1.TenantBinding{}, IndexBindingNamespace, IndexBindingNamespaces).
		WithObjects(f.objects()...).Build()
	live := interceptor.NewClient(w.client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if w.failLive.Load() {
				return errLive
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileLab, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Cache: w.client, Live: live, Tokens: w.tokens, Keys: Secrets{Reader: w.client, Namespace: brokerNS},
		Evaluator: ev, Events: w.recorder, Audit: NewAudit(w.audit), Clock: w.clock, SessionTTL: 30 * time.Minute,
	}
	if options != nil {
		options(&opts)
	}
	w.broker, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewServer(w.broker)
	t.Cleanup(w.srv.Close)
	return w
}

// update reads obj from the fake API server, changes it and writes it
// back.
func (w *world) update(obj client.Object, mutate func()) {
	w.t.Helper()
	if err := w.client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		w.t.Fatal(err)
	}
	mutate()
	if err := w.client.Update(context.Background(), obj); err != nil {
		w.t.Fatal(err)
	}
}

// events returns the Events recorded so far.
func (w *world) events() []string {
	var out []string
	for {
		select {
		case e := <-w.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// records returns the audit lines written so far, checking that each is
// one JSON object stamped with the fake clock's time and a message.
func (w *world) records() []Record {
	w.t.Helper()
	var out []Record
	for _, line := range strings.Split(strings.TrimSuffix(w.audit.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var r Record
		if err := dec.Decode(&r); err != nil {
			w.t.Fatalf("audit line %q: %v", line, err)
		}
		if r.Time.Before(epoch) || r.Time.After(w.clock.Now()) || r.Time.Location() != time.UTC || r.Message == "" {
			w.t.Errorf("audit line %q: want a UTC time of the fake clock and a message", line)
		}
		out = append(out, r)
	}
	return out
}

// reply is an answer of the broker.
type reply struct {
	step   string
	status int
	header http.Header
	body   []byte
}

// problem decodes the reply as problem details.
func (r reply) problem(t *testing.T) Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: Content-Type %q, want application/problem+json; body %s", r.step, ct, r.body)
	}
	var p Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: the problem %s: %v", r.step, r.body, err)
	}
	if p.Detail == "" {
		t.Errorf("%s: the problem has no detail: %s", r.step, r.body)
	}
	return p
}

// kbsClient speaks the protocol to the world's broker.
type kbsClient struct {
	t      *testing.T
	w      *world
	cookie string
	nonce  string
	// priv decrypts the answers; pub is the tee-pubkey sent.
	priv any
	pub  json.RawMessage
}

func (w *world) newClient() *kbsClient { return &kbsClient{t: w.t, w: w} }

func (c *kbsClient) do(step, method, path, contentType string, body []byte) reply {
	c.t.Helper()
	req, err := http.NewRequest(method, c.w.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
	}
	resp, err := c.w.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return reply{step: step, status: resp.StatusCode, header: resp.Header, body: data}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// auth opens a session and keeps its cookie and nonce.
func (c *kbsClient) auth(tee string) reply {
	c.t.Helper()
	r := c.do("auth", http.MethodPost, PathAuth, "application/json", mustJSON(c.t, Request{Version: ProtocolVersion, TEE: tee}))
	if r.status != http.StatusOK {
		return r
	}
	var ch Challenge
	if err := json.Unmarshal(r.body, &ch); err != nil {
		c.t.Fatalf("auth: %s: %v", r.body, err)
	}
	if len(ch.Nonce) != 43 || string(ch.ExtraParams) != "{}" {
		c.t.Errorf("auth: challenge %s: want a 32-byte base64url nonce and empty extra-params", r.body)
	}
	c.nonce = ch.Nonce
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != CookieName || cookies[0].Value == "" || !cookies[0].HttpOnly ||
		cookies[0].Path != "/kbs" || cookies[0].SameSite != http.SameSiteStrictMode {
		c.t.Fatalf("auth: cookies %v: want one HttpOnly, SameSite=Strict %s for /kbs", cookies, CookieName)
	}
	c.cookie = cookies[0].Value
	return r
}

// attest sends the attestation; an empty nonce sends the session's.
func (c *kbsClient) attest(token, nonce string) reply {
	c.t.Helper()
	if nonce == "" {
		nonce = c.nonce
	}
	att := Attestation{RuntimeData: RuntimeData{Nonce: nonce, TEEPubKey: c.pub}, TEEEvidence: Evidence{Token: token}}
	return c.do("attest", http.MethodPost, PathAttest, "application/json", mustJSON(c.t, att))
}

func (c *kbsClient) resource(path string) reply {
	c.t.Helper()
	return c.do("resource", http.MethodGet, PathResource+path, "", nil)
}

// open decrypts a released key and checks it is a flattened JWE with the
// key management algorithm alg.
func (c *kbsClient) open(r reply, alg jose.KeyAlgorithm) []byte {
	c.t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		c.t.Errorf("resource: Content-Type %q, want application/json", ct)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		c.t.Errorf("resource: Cache-Control %q, want no-store", cc)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &fields); err != nil {
		c.t.Fatalf("resource: %s: %v", r.body, err)
	}
	for _, k := range []string{"protected", "encrypted_key", "iv", "ciphertext", "tag"} {
		if _, ok := fields[k]; !ok {
			c.t.Errorf("resource: the JWE %s has no %q: want the flattened JSON serialization", r.body, k)
		}
	}
	if _, ok := fields["recipients"]; ok {
		c.t.Errorf("resource: the JWE %s has recipients: want the flattened JSON serialization", r.body)
	}
	obj, err := jose.ParseEncrypted(string(r.body), []jose.KeyAlgorithm{jose.ECDH_ES_A256KW, jose.RSA_OAEP_256},
		[]jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		c.t.Fatalf("resource: parsing the JWE: %v", err)
	}
	if obj.Header.Algorithm != string(alg) {
		c.t.Errorf("resource: alg %s, want %s", obj.Header.Algorithm, alg)
	}
	plain, err := obj.Decrypt(c.priv)
	if err != nil {
		c.t.Fatalf("resource: decrypting the JWE: %v", err)
	}
	return plain
}

// The tee-pubkeys of the cases: each sets the client's key pair.
type keyKind func(t testing.TB, c *kbsClient)

func publicJWK(t testing.TB, key any, alg string) json.RawMessage {
	t.Helper()
	data, err := (&jose.JSONWebKey{Key: key, Algorithm: alg}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func ecKey(t testing.TB, c *kbsClient) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.priv, c.pub = k, publicJWK(t, &k.PublicKey, "")
}

func rsaKey(bits int) keyKind {
	return func(t testing.TB, c *kbsClient) {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		c.priv, c.pub = k, publicJWK(t, &k.PublicKey, "")
	}
}

func octKey(t testing.TB, c *kbsClient) {
	k := []byte("0123456789abcdef0123456789abcdef")
	c.priv, c.pub = k, publicJWK(t, k, "")
}

func privateKey(t testing.TB, c *kbsClient) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.priv, c.pub = k, publicJWK(t, k, "")
}

// Expected Events, as the fake recorder renders them.
func released(what, node string) string {
	return "Normal KeyReleased " + what + " granted on node " + node
}

func refused(what, node, reasons string) string {
	return "Warning KeyRefused " + what + " refused on node " + node + ": " + reasons + " ("
}

// checkEvents checks the Events: each one starts with its want, in order.
func checkEvents(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("Events:\n got %q\nwant %q (prefixes)", got, want)
	}
}

// checkRecords compares audit records, ignoring their time and message.
func checkRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Record{}, "Time", "Message"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// Expected audit records.
func acmeRecord(decision, key string, reasons ...guard.Reason) Record {
	return Record{Decision: decision, Reasons: reasons, Tenant: "acme", Namespace: acmeNS, Pod: acmePod, Node: acmeNode, Key: key, Peer: "127.0.0.1"}
}
