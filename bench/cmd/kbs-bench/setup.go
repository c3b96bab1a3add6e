package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/xila-guard/xila-guard/bench/internal/apiserver"
	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/kbs"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
)

const (
	platformNS = "xila-guard-system"
	tenant     = "acme"
	tenantNS   = "acme-ml"
	pool       = "acme"
	nodeName   = "kbs-node-0"
	// incarnation is the node's evidence incarnation, which every pod was
	// bound against.
	incarnation = "i1"
	// resource is the key every request asks for.
	resource       = "acme/model/key"
	serviceAccount = "workload"
	// podIP is every pod's IP: the client connects from it.
	podIP = "127.0.0.1"
)

// measurement is the launch measurement the node's evidence shows and the
// policy allows.
var measurement = func() v1alpha1.Measurement {
	sum := sha512.Sum384([]byte("workload v1"))
	return v1alpha1.Measurement("sha384:" + hex.EncodeToString(sum[:]))
}()

// bench is the running system.
type bench struct {
	o *options
	s *apiserver.Server
	// apiserver and etcd are the pids of the two processes.
	apiserver, etcd int
	// live is the broker's uncached client, tokens its token reviewer;
	// the baselines use them too.
	live   client.Client
	tokens kbs.TokenReviewer
	node   *corev1.Node
	pods   []*corev1.Pod
	// tokens of the pods, and a client key for each.
	podTokens []string
	keys      []*ecdsa.PrivateKey
	// secret is the key the Secret holds.
	secret []byte
	// kc is the KBS client; url the broker's.
	kc       *kbs.Client
	url      string
	srv      *http.Server
	stopping context.CancelFunc
}

// setUp starts the API server, creates the tenant, its node, policies,
// key and pods, and starts the broker.
func setUp(ctx context.Context, o *options) (*bench, error) {
	s, err := apiserver.Start(o.assets, o.crds, "xila-guard-kbs", "kbs-bench")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, s: s, stopping: func() {}}
	ok := false
	defer func() {
		if !ok {
			b.stop()
		}
	}()
	children := host.Children()
	if len(children["kube-apiserver"]) != 1 || len(children["etcd"]) != 1 {
		return nil, fmt.Errorf("want one kube-apiserver and one etcd among this process's children, got %v", children)
	}
	b.apiserver, b.etcd = children["kube-apiserver"][0], children["etcd"][0]
	if err := b.objects(ctx); err != nil {
		return nil, err
	}
	if err := b.startBroker(ctx); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

func (b *bench) stop() {
	if b.srv != nil {
		_ = b.srv.Close()
	}
	b.stopping()
	b.s.Stop()
}

// objects creates what the broker judges: the namespaces, the node and its
// attested evidence, the tenant's binding, placement policy and key
// release policy, the key's Secret, and the pods, bound to the node with
// the bound-evidence annotation, running on podIP, with their tokens.
func (b *bench) objects(ctx context.Context) error {
	g, kube := b.s.Guard, b.s.Kube
	b.secret = make([]byte, 32)
	_, _ = rand.Read(b.secret)
	age := &metav1.Duration{Duration: time.Hour}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{guard.LabelTenant: tenant}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: serviceAccount}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: tenant + "-keys"},
			Data: map[string][]byte{"model": b.secret}},
		// The policy of e2e's attested tenant: attested SEV-SNP evidence
		// with the allowed measurement and a Passed verdict. Its ages are
		// an hour so that the evidence written once stays fresh for the
		// whole run.
		&v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: tenant + "-attested"}, Spec: v1alpha1.PlacementPolicySpec{
			Confinement: v1alpha1.ConfinementPool,
			Evidence:    v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}, MaxAge: age},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{TEETypes: []v1alpha1.TEEType{v1alpha1.TEESEVSNP},
				AllowedMeasurements: []v1alpha1.Measurement{measurement}, RequireAttestation: true, MaxAttestationAge: age},
		}},
		&v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: tenant, Namespaces: []string{tenantNS}, NodePool: pool,
			EffectivePolicyRef: &v1alpha1.PolicyReference{Name: tenant + "-attested"}}},
		&v1alpha1.KeyReleasePolicy{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Spec: v1alpha1.KeyReleasePolicySpec{
			TenantID: tenant, ServiceAccounts: []string{tenantNS + "/" + serviceAccount},
			Keys: []v1alpha1.KeyRelease{{Resource: resource, SecretRef: v1alpha1.KeySecretReference{Name: tenant + "-keys", Key: "model"}}}}},
	} {
		if err := g.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	b.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{guard.LabelTenantPool: pool}}}
	if err := g.Create(ctx, b.node); err != nil {
		return err
	}
	now := metav1.NewTime(time.Now())
	nss := &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{guard.LabelTenantPool: pool}},
		Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: b.node.UID, Incarnation: incarnation, ObservedAt: now, Source: v1alpha1.SourceAttested, Complete: true,
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, Measurement: measurement,
				Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: now,
					Verifier: "xila-guard-attest", RootOfTrust: v1alpha1.RootAMD}},
		}}
	if err := g.Create(ctx, nss); err != nil {
		return fmt.Errorf("creating the NodeSecurityState: %w", err)
	}
	exp := int64(2 * 3600)
	for i := range b.o.pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fmt.Sprintf("workload-%03d", i),
			Annotations: map[string]string{guard.AnnotationBoundEvidence: guard.BoundEvidence(string(b.node.UID), incarnation)}},
			Spec: corev1.PodSpec{ServiceAccountName: serviceAccount, SchedulerName: guard.SchedulerName,
				Containers: []corev1.Container{{Name: "w", Image: "registry.example/acme/train:1.4.2"}}}}
		pod, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if err := kube.CoreV1().Pods(tenantNS).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("binding pod %s: %w", pod.Name, err)
		}
		if pod, err = kube.CoreV1().Pods(tenantNS).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}}
		if pod, err = kube.CoreV1().Pods(tenantNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return err
		}
		tr, err := kube.CoreV1().ServiceAccounts(tenantNS).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{guard.KeyBrokerAudience}, ExpirationSeconds: &exp,
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}},
			metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("requesting the token of pod %s: %w", pod.Name, err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		b.pods, b.podTokens, b.keys = append(b.pods, pod), append(b.podTokens, tr.Status.Token), append(b.keys, key)
	}
	return nil
}

// startBroker starts the broker's cache and serves the broker on
// 127.0.0.1.
func (b *bench) startBroker(ctx context.Context) error {
	// The broker's informers log through controller-runtime; the
	// benchmark keeps stderr for its own progress.
	ctrllog.SetLogger(logr.Discard())
	scheme := b.s.Guard.Scheme()
	cctx, cancel := context.WithCancel(ctx)
	b.stopping = cancel
	c, err := cache.New(b.s.Config, cache.Options{
		Scheme:           scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{platformNS: {}},
		}},
	})
	if err != nil {
		return err
	}
	if err := c.IndexField(cctx, &v1alpha1.TenantBinding{}, kbs.IndexBindingNamespace, kbs.IndexBindingNamespaces); err != nil {
		return err
	}
	for _, obj := range []client.Object{&corev1.Namespace{}, &corev1.Secret{}, &v1alpha1.TenantBinding{},
		&v1alpha1.PlacementPolicy{}, &v1alpha1.KeyReleasePolicy{}} {
		if _, err := c.GetInformer(cctx, obj); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		return errors.New("the broker's cache did not sync")
	}
	cached, err := client.New(b.s.Config, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return err
	}
	if b.live, err = client.New(b.s.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	b.tokens = kbs.TokenReviews{Client: cached}
	ev, err := evaluate.New(evaluate.Options{Profile: guard.ProfileProduction})
	if err != nil {
		return err
	}
	eb := events.NewBroadcaster(&events.EventSinkImpl{Interface: b.s.Kube.EventsV1()})
	if err := eb.StartRecordingToSinkWithContext(cctx); err != nil {
		return err
	}
	broker, err := kbs.New(kbs.Options{
		Cache:       cached,
		Live:        b.live,
		Tokens:      b.tokens,
		Keys:        kbs.Secrets{Reader: cached, Namespace: platformNS},
		Evaluator:   ev,
		Events:      eb.NewRecorder(scheme, "xila-guard-attest-key-broker"),
		Audit:       kbs.NewAudit(io.Discard),
		Log:         logr.Discard(),
		MaxSessions: b.o.maxSessions,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", podIP+":0")
	if err != nil {
		return err
	}
	b.url = "http://" + ln.Addr().String()
	b.srv = &http.Server{Handler: withTimeout(broker, 10*time.Second), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	// One transport for every session, keeping enough idle connections
	// for the requests in flight: a new TCP connection per exchange would
	// measure the loopback's handshakes.
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}, Timeout: 5 * time.Second}).DialContext}
	b.kc = &kbs.Client{URL: b.url, HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}, TEE: "snp"}
	return nil
}

// withTimeout bounds every request's context, as the key-broker command
// does with --request-timeout (10s by default).
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// podKey is the object key of pod i.
func (b *bench) podKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: tenantNS, Name: b.pods[i].Name}
}
