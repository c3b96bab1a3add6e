//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// Names the key release checks share with the product (the chart's
// confidential.keyBroker, docs/attest.md#key-release).
const (
	kbsName          = "xila-guard-kbs"
	kbsAudience      = "xila-guard-kbs"
	kbsTokenDir      = "/var/run/secrets/xila-guard/kbs"
	kbsBinary        = "/xila-guard-attest"
	kbsContainer     = "kbs"
	keyReleasedEvent = "KeyReleased"
	keyRefusedEvent  = "KeyRefused"
	// keySecret keeps the attested tenant's key in the platform namespace.
	keySecret = "xg-e2e-tenant-keys"
)

var guardKeyPolicies = schema.GroupVersionResource{Group: lab.Group, Version: "v1alpha1", Resource: "keyreleasepolicies"}

func kbsURL() string { return "http://" + kbsName + "." + lab.PlatformNamespace + ".svc:8082" }

// keyRelease is what installAttestation made for the key broker, and the
// pod the key release steps keep running.
type keyRelease struct {
	// resource is the attested tenant's key, sha256 the digest of its value.
	resource, sha256 string
	// other is a second tenant, bound to the attested tenant's pool and
	// policy, that no KeyReleasePolicy gives a key.
	other string
	// holder is the attested tenant's pod that fetched the key and keeps
	// running (kbs-client --hold); replayNS the unprotected namespace a
	// copy of its token is replayed from.
	holder, replayNS string
}

type keyReleaseKey struct{}

func keyReleaseFrom(ctx context.Context, t *testing.T) *keyRelease {
	t.Helper()
	k, ok := ctx.Value(keyReleaseKey{}).(*keyRelease)
	if !ok {
		t.Fatal("no key release set-up in the context: the feature's Setup failed")
	}
	return k
}

// setUpKeyRelease keeps a random key in a Secret of the platform
// namespace, gives it to tenant with a KeyReleasePolicy, and makes a second
// tenant bound to tenant's pool and policy, whom no policy gives a key.
func setUpKeyRelease(ctx context.Context, t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, tenant string) context.Context {
	t.Helper()
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	value := []byte(hex.EncodeToString(raw))
	sum := sha256.Sum256(value)
	k := &keyRelease{resource: tenant + "/model/key", sha256: hex.EncodeToString(sum[:]), other: envconf.RandomName("xg-other", 16)}
	ctx = context.WithValue(ctx, keyReleaseKey{}, k)

	if _, err := cs.CoreV1().Namespaces().Get(ctx, lab.PlatformNamespace, metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lab.PlatformNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", lab.PlatformNamespace, err)
		}
	}
	_ = cs.CoreV1().Secrets(lab.PlatformNamespace).Delete(ctx, keySecret, metav1.DeleteOptions{})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret}, Data: map[string][]byte{"model": value}}
	if _, err := cs.CoreV1().Secrets(lab.PlatformNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the key Secret: %v", err)
	}
	createGuard(ctx, t, dyn, fixture.MakeKeyReleasePolicy(tenant).Key(k.resource, keySecret, "model").Obj())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.other, Labels: map[string]string{lab.TenantLabel: k.other}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the second tenant's namespace: %v", err)
	}
	createGuard(ctx, t, dyn, fixture.MakeTenantBinding(k.other, k.other).Pool(tenant).Policy(tenant).Obj())
	return ctx
}

// tearDownKeyRelease removes what setUpKeyRelease and the key release
// steps made.
func tearDownKeyRelease(ctx context.Context, t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, tenant string) {
	t.Helper()
	k, _ := ctx.Value(keyReleaseKey{}).(*keyRelease)
	if k == nil {
		return
	}
	_ = dyn.Resource(lab.Bindings).Delete(ctx, k.other, metav1.DeleteOptions{})
	_ = dyn.Resource(guardKeyPolicies).Delete(ctx, tenant, metav1.DeleteOptions{})
	_ = cs.CoreV1().Secrets(lab.PlatformNamespace).Delete(ctx, keySecret, metav1.DeleteOptions{})
	for _, ns := range []string{k.other, k.replayNS} {
		if ns == "" {
			continue
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	}
}

// kbsResult is one JSON line of kbs-client.
type kbsResult struct {
	Resource string `json:"resource"`
	SHA256   string `json:"sha256"`
	Status   int    `json:"status"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
}

// kbsResults parses kbs-client's JSON lines out of its output (its error
// line on stderr may be mixed in).
func kbsResults(out string) []kbsResult {
	var rs []kbsResult
	for _, line := range strings.Split(out, "\n") {
		var r kbsResult
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil && r.Resource != "" {
			rs = append(rs, r)
		}
	}
	return rs
}

// wantReleased fails the test unless r released the key whose digest is sum.
func wantReleased(t *testing.T, what string, r kbsResult, sum string) {
	t.Helper()
	if r.SHA256 != sum || r.Reason != "" || r.Error != "" {
		t.Errorf("%s: %+v; want the key released, sha256 %s", what, r, sum)
	}
}

// wantRefused fails the test unless r is a 403 refusal naming reason.
func wantRefused(t *testing.T, what string, r kbsResult, reason string) {
	t.Helper()
	if r.SHA256 != "" || r.Status != 403 || !slices.Contains(strings.Split(r.Reason, ","), reason) {
		t.Errorf("%s: %+v; want refused (403) with %s", what, r, reason)
	}
}

// kbsPod is a pod whose one container runs kbs-client with args against
// the chart's key broker, with a projected token of the broker's audience.
func kbsPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: kbsContainer, Image: suite.componentImage("attest"), ImagePullPolicy: corev1.PullNever,
				Args:         append([]string{"kbs-client", "--url=" + kbsURL()}, args...),
				VolumeMounts: []corev1.VolumeMount{{Name: "kbs-token", MountPath: kbsTokenDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "kbs-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: kbsAudience, ExpirationSeconds: ptrTo(int64(600)), Path: "token"}}},
			}}}},
		},
	}
}

// createKBSPod creates a kbsPod of a tenant for the controlled scheduler.
func createKBSPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, args ...string) *corev1.Pod {
	t.Helper()
	p := kbsPod(name, args...)
	p.Spec.SchedulerName = lab.ControlledScheduler
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// podResult waits for a one-shot kbs-client pod and returns its one
// result, checking that its exit agrees with it.
func podResult(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) (kbsResult, *corev1.Pod) {
	t.Helper()
	phase, log := waitPodDone(ctx, t, cs, p)
	rs := kbsResults(log)
	if len(rs) != 1 {
		t.Fatalf("pod %s/%s (%s): want one kbs-client result, log:\n%s", p.Namespace, p.Name, phase, log)
	}
	if released := rs[0].SHA256 != ""; released != (phase == corev1.PodSucceeded) {
		t.Errorf("pod %s/%s ended %s with %+v", p.Namespace, p.Name, phase, rs[0])
	}
	got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs[0], got
}

// createHolder creates a tenant's kbs pod that fetches nothing and only
// holds (kbs-client --hold), and waits until it runs and the API server
// shows its IPs. The key broker matches a request's source against the
// pod's recorded IPs, and the kubelet records them only after the
// container has started: a fetch at container start can be refused as
// PEER_MISMATCH, so every fetch of a tenant pod is run in it with kbsExec.
func createHolder(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	createKBSPod(ctx, t, cs, ns, name, "--hold")
	p := waitRunning(ctx, t, cs, ns, name)
	if len(p.Status.PodIPs) == 0 {
		t.Fatalf("pod %s/%s runs and is Ready with no IP recorded", ns, name)
	}
	return p
}

// kbsExec runs kbs-client for resource in a running kbs pod, with the
// pod's own token and address, and returns its result.
func kbsExec(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, pod, resource string) kbsResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
		"exec", "-n", ns, pod, "-c", kbsContainer, "--", kbsBinary, "kbs-client", "--url="+kbsURL(), resource)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rs := kbsResults(stdout.String())
	if len(rs) != 1 {
		t.Fatalf("kbs-client in pod %s/%s: %v; want one result (stdout %q, stderr %q)", ns, pod, err, stdout.String(), stderr.String())
	}
	if released := rs[0].SHA256 != ""; released != (err == nil) {
		t.Errorf("kbs-client in pod %s/%s exited with %v, result %+v", ns, pod, err, rs[0])
	}
	return rs[0]
}

// wantBoundEvidence fails the test unless the pod carries the evidence
// record of its node's attested state s, which the controlled scheduler
// writes at PreBind.
func wantBoundEvidence(t *testing.T, p *corev1.Pod, s *attestedSpec) {
	t.Helper()
	got, ok := p.Annotations[guard.AnnotationBoundEvidence]
	if !ok {
		t.Fatalf("pod %s/%s, bound by %s to %s, has no %s annotation: the controlled scheduler did not record the evidence it was bound against",
			p.Namespace, p.Name, p.Spec.SchedulerName, p.Spec.NodeName, guard.AnnotationBoundEvidence)
	}
	if want := s.BoundEvidence(); got != want {
		t.Errorf("pod %s/%s: %s is %q, want %q (the attested state of %s)", p.Namespace, p.Name, guard.AnnotationBoundEvidence, got, want, p.Spec.NodeName)
	}
}

// waitKeyEvent waits for the key broker's Event with reason (KeyReleased
// or KeyRefused) on the pod whose note contains every part, and returns
// its note.
func waitKeyEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason string, parts ...string) string {
	t.Helper()
	var seen []string
	var note string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
	events:
		for _, e := range list.Items {
			if e.Regarding.Kind != "Pod" || e.Regarding.Name != p.Name || e.Regarding.UID != p.UID {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason != reason {
				continue
			}
			for _, part := range parts {
				if !strings.Contains(e.Note, part) {
					continue events
				}
			}
			note = e.Note
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no %s Event naming %q: %v (seen: %s)", p.Namespace, p.Name, reason, parts, err, strings.Join(seen, " | "))
	}
	return note
}

// auditRecord is the part of the key broker's audit line the test reads.
type auditRecord struct {
	Decision  string   `json:"decision"`
	Reasons   []string `json:"reasons"`
	Tenant    string   `json:"tenant"`
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Node      string   `json:"node"`
	Key       string   `json:"key"`
	Peer      string   `json:"peer"`
}

// waitAudit waits until a key broker replica's log has an audit line
// satisfying ok, and returns it.
func waitAudit(ctx context.Context, t *testing.T, cs kubernetes.Interface, what string, ok func(*auditRecord) bool) *auditRecord {
	t.Helper()
	var found *auditRecord
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + kbsName})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			b, err := cs.CoreV1().Pods(lab.PlatformNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.Contains(line, `"decision":`) {
					continue
				}
				r := &auditRecord{}
				if json.Unmarshal([]byte(line), r) == nil && ok(r) {
					found = r
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no audit line of the key broker for %s: %v", what, err)
	}
	return found
}

// createWhenAccountExists creates the pod in a namespace just made, once
// its default service account exists.
func createWhenAccountExists(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	var created *corev1.Pod
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, last = cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); last != nil {
			return false, nil
		}
		created, last = cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v (%v)", ns, p.Name, err, last)
	}
	return created
}
