//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/app"
	"github.com/xila-guard/xila-guard/components/attest/kbs"
)

// syncBuffer is an io.Writer safe for the broker's audit and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startBroker runs the key broker as its own service account, holding only
// its generated ClusterRole and a Role reading Secrets in attesterNS.
func startBroker(t *testing.T) (string, *syncBuffer) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, attesterNS)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: attesterNS, Name: "xila-guard-kbs"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: attesterNS, Name: "xila-guard-kbs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: brokerUser}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr()
	o, err := app.ParseKeyBrokerFlags([]string{"--namespace=" + attesterNS, "--profile=lab", "--bind-address=" + addr,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.RunKeyBrokerWithConfig(bctx, brokerConfig, o, audit, logr.Discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("key broker: %v", err)
		}
	})
	eventually(t, 30*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("key broker: %v", err)
		default:
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	return "http://" + addr, audit
}

// kbsTenant makes a tenant: its namespace and service account, its
// TenantBinding on pool acme (the fixtures' nodes) and its policy, which
// requires attested SEV-SNP evidence with the allowed measurement.
func kbsTenant(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	ns := "kbs-" + id
	ensureNamespace(t, ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload"}}
	const age = 8 * time.Second
	policy := fixture.MakePlacementPolicy("kbs-"+id, v1alpha1.SourceAttested).MaxAge(age).
		TEE(v1alpha1.TEESEVSNP).Measurements(measurementOf(allowed)).RequireAttestation(age).Obj()
	binding := fixture.MakeTenantBinding(id, ns).Pool("acme").Policy(policy.Name).Obj()
	for _, o := range []client.Object{sa, policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	return ns
}

// boundPod creates a pod running on the node at ip, with the bound-evidence
// annotation of the node's current attested evidence unless bound is
// false, as the controlled scheduler writes it.
func boundPod(t *testing.T, ns, name, node, ip string, bound bool) *corev1.Pod {
	t.Helper()
	b := fixture.MakePod(name, ns).NodeName(node).ServiceAccount("workload")
	if bound {
		nss, err := getState(t, node)
		if err != nil {
			t.Fatal(err)
		}
		b.Annotation(guard.AnnotationBoundEvidence, guard.BoundEvidence(string(nss.Spec.NodeUID), nss.Spec.Incarnation))
	}
	pod := b.Obj()
	ctx := context.Background()
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	return pod
}

// podToken is the pod's projected token, as the kubelet would mount it.
func podToken(t *testing.T, pod *corev1.Pod, audience string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}}
	exp := int64(600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// fetch runs a whole exchange from the source address ip.
func fetch(ctx context.Context, url, ip, token, resource string) ([]byte, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c := &kbs.Client{URL: url, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	s, err := c.Attest(ctx, token, key)
	if err != nil {
		return nil, err
	}
	return s.Resource(ctx, resource)
}

// refusedWith checks that err is the broker's refusal with the reason.
func refusedWith(t *testing.T, what string, err error, reason guard.Reason) {
	t.Helper()
	var r *kbs.RefusedError
	if !errors.As(err, &r) || r.Problem.Reason != string(reason) {
		t.Errorf("%s: %v, want a refusal with %s", what, err, reason)
	}
}

// TestIntegrationKeyRelease runs the attestation controller and the key
// broker, each as its own service account, and asks for a key from the
// seat of each principal: the pod on the attested node it was bound to
// gets it; its token replayed from another pod's address, another
// tenant's pod, a pod with no binding record, a token for another
// audience, a deleted pod, a pod after its node rebooted (new
// incarnation) and a pod on a node whose attester stopped (stale
// evidence) are refused, each with its reason, an Event and an audit line.
func TestIntegrationKeyRelease(t *testing.T) {
	t.Run("G-KEY-PEER G-KEY-POLICY a key from the seat of each principal", testKeyRelease)
}

func testKeyRelease(t *testing.T) {
	startController(t)
	url, audit := startBroker(t)
	ctx := context.Background()
	node := newFixture(t, "kbs-node", allowed)
	other := newFixture(t, "kbs-other", allowed)
	for _, n := range []string{"kbs-node", "kbs-other"} {
		waitState(t, n, 30*time.Second, verdict(v1alpha1.AttestationPassed, ""))
	}
	acme, globex := kbsTenant(t, "kbsacme"), kbsTenant(t, "kbsglobex")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attesterNS, Name: "kbsacme-keys"},
		Data: map[string][]byte{"model": []byte("the model key of acme")}}
	krp := fixture.MakeKeyReleasePolicy("kbsacme").Key("acme/model/key", secret.Name, "model").Obj()
	for _, o := range []client.Object{secret, krp} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	const resource = "acme/model/key"

	victim := boundPod(t, acme, "victim", "kbs-node", "127.0.0.2", true)
	token := podToken(t, victim, guard.KeyBrokerAudience)
	// The broker's caches may need a moment for the new policy.
	eventually(t, 10*time.Second, func() error {
		key, err := fetch(ctx, url, "127.0.0.2", token, resource)
		if err == nil && string(key) != "the model key of acme" {
			t.Fatalf("released %q, want the Secret's key", key)
		}
		return err
	})
	waitPodEvent(t, victim, guard.EventReasonKeyReleased, "")
	if a := audit.String(); !strings.Contains(a, `"decision":"released"`) || !strings.Contains(a, `"pod":"victim"`) || !strings.Contains(a, `"tenant":"kbsacme"`) {
		t.Errorf("audit has no released line for the victim:\n%s", a)
	}

	// The victim's token, replayed from a pod on the other node.
	boundPod(t, acme, "thief", "kbs-other", "127.0.0.3", true)
	_, err := fetch(ctx, url, "127.0.0.3", token, resource)
	refusedWith(t, "replayed token", err, guard.ReasonPeerMismatch)
	waitPodEvent(t, victim, guard.EventReasonKeyRefused, string(guard.ReasonPeerMismatch))

	// Another tenant's pod on the same attested node.
	rival := boundPod(t, globex, "rival", "kbs-node", "127.0.0.4", true)
	_, err = fetch(ctx, url, "127.0.0.4", podToken(t, rival, guard.KeyBrokerAudience), resource)
	refusedWith(t, "another tenant's pod", err, guard.ReasonKeyNotOwned)

	// A pod that nothing bound against evidence.
	unbound := boundPod(t, acme, "unbound", "kbs-node", "127.0.0.5", false)
	_, err = fetch(ctx, url, "127.0.0.5", podToken(t, unbound, guard.KeyBrokerAudience), resource)
	refusedWith(t, "unbound pod", err, guard.ReasonBindingUnrecorded)

	// A token for another audience.
	_, err = fetch(ctx, url, "127.0.0.2", podToken(t, victim, "https://kubernetes.default.svc"), resource)
	refusedWith(t, "token of another audience", err, guard.ReasonTokenInvalid)

	// A deleted pod's token.
	gone := boundPod(t, acme, "gone", "kbs-node", "127.0.0.6", true)
	goneToken := podToken(t, gone, guard.KeyBrokerAudience)
	if err := k8s.Delete(ctx, gone, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	_, err = fetch(ctx, url, "127.0.0.6", goneToken, resource)
	if err == nil {
		t.Error("a deleted pod's token was given the key")
	}

	// Stale evidence: kbs-other's attester stops answering.
	stale := boundPod(t, acme, "stale", "kbs-other", "127.0.0.7", true)
	staleToken := podToken(t, stale, guard.KeyBrokerAudience)
	if _, err := fetch(ctx, url, "127.0.0.7", staleToken, resource); err != nil {
		t.Fatalf("a pod on the other attested node before its attester stopped: %v", err)
	}
	_ = other.server.Close()
	eventually(t, 30*time.Second, func() error {
		_, err := fetch(ctx, url, "127.0.0.7", staleToken, resource)
		var r *kbs.RefusedError
		if errors.As(err, &r) && (r.Problem.Reason == string(guard.ReasonAttestationStale) || r.Problem.Reason == string(guard.ReasonEvidenceStale)) {
			return nil
		}
		return fmt.Errorf("a pod on a node whose attester stopped: %v", err)
	})

	// The victim's node reboots: new boot ID, new incarnation.
	before, _ := getState(t, "kbs-node")
	setBootID(t, node.node, "boot-2")
	waitState(t, "kbs-node", 30*time.Second, func(n *v1alpha1.NodeSecurityState) error {
		if n.Spec.Incarnation == before.Spec.Incarnation {
			return errors.New("the incarnation has not changed yet")
		}
		return verdict(v1alpha1.AttestationPassed, "")(n)
	})
	_, err = fetch(ctx, url, "127.0.0.2", token, resource)
	refusedWith(t, "the victim after its node rebooted", err, guard.ReasonNodeChanged)
	// A pod bound after the reboot gets the key.
	fresh := boundPod(t, acme, "fresh", "kbs-node", "127.0.0.8", true)
	if _, err := fetch(ctx, url, "127.0.0.8", podToken(t, fresh, guard.KeyBrokerAudience), resource); err != nil {
		t.Errorf("a pod bound after the reboot: %v", err)
	}
	if a := audit.String(); !strings.Contains(a, `"reasons":["NODE_CHANGED"]`) {
		t.Errorf("audit has no NODE_CHANGED line:\n%s", a)
	}
}

// waitPodEvent waits for an Event about the pod with the reason whose note
// contains text.
func waitPodEvent(t *testing.T, pod *corev1.Pod, reason, text string) {
	t.Helper()
	eventually(t, 15*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(pod.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == pod.UID && e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event with %q on pod %s/%s among %d", reason, text, pod.Namespace, pod.Name, len(list.Items))
	})
}
