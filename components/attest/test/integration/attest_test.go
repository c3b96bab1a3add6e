//go:build integration

package integration

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/app"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/controller"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

const (
	attesterNS = "xila-guard-system"
	interval   = 2 * time.Second
	labDir     = "../../testdata/labchain/lab"
)

var (
	allowed = sha512.Sum384([]byte("workload v1"))
	// tampered is a measurement the reference values do not allow.
	tampered = sha512.Sum384([]byte("workload v1, patched"))
)

func measurementOf(digest [48]byte) v1alpha1.Measurement {
	return v1alpha1.Measurement("sha384:" + hex.EncodeToString(digest[:]))
}

var (
	chainOnce sync.Once
	chain     *labtee.Chain
)

func labChain(t *testing.T) *labtee.Chain {
	t.Helper()
	chainOnce.Do(func() {
		var err error
		if chain, err = labtee.ReadSecretDir(labDir); err != nil {
			t.Fatal(err)
		}
	})
	return chain
}

// running is the controller every test shares: it registers its metrics
// with controller-runtime's registry, so it runs once per process.
type running struct {
	challengeURL, metricsURL string
}

var (
	controllerOnce sync.Once
	shared         *running
	sharedErr      error
)

// startController runs the whole controller, as its service account and
// with leader election, under the lab profile with the lab chain's root and
// reference values that allow the measurement allowed. It runs until the
// process ends.
func startController(t *testing.T) *running {
	t.Helper()
	controllerOnce.Do(func() { shared, sharedErr = runShared() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func runShared() (*running, error) {
	dir, err := os.MkdirTemp("", "xila-guard-attest-")
	if err != nil {
		return nil, err
	}
	refs := filepath.Join(dir, "reference-values.yaml")
	if err := os.WriteFile(refs, []byte("measurements:\n- {tee: SEV-SNP, measurement: \""+string(measurementOf(allowed))+"\"}\n"), 0o644); err != nil {
		return nil, err
	}
	challenge, metrics := freeAddr(), freeAddr()
	o, err := app.ParseControllerFlags([]string{
		"--profile=lab", "--lab-root-file=" + filepath.Join(labDir, labtee.SecretCertChain), "--reference-values=" + refs,
		"--attester-namespace=" + attesterNS, "--interval=" + interval.String(), "--retry-interval=300ms", "--attester-timeout=1s",
		"--challenge-bind-address=" + challenge, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=0",
		"--leader-election-namespace=default",
	}, io.Discard)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunControllerWithConfig(ctx, controllerConfig, o, logr.Discard()) }()
	stopController = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "controller: %v\n", err)
		}
	}
	c := &running{challengeURL: "http://" + challenge + "/v1/challenge/", metricsURL: "http://" + metrics + "/metrics"}
	// Wait for the challenge endpoint, or for the controller to fail.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			stopController = func() {}
			return nil, fmt.Errorf("controller: %w", err)
		default:
		}
		if conn, err := net.Dial("tcp", challenge); err == nil {
			conn.Close()
			return c, nil
		}
	}
	return nil, errors.New("the controller's challenge endpoint did not come up")
}

// switchable is a backend that can be replaced while the attester runs.
type switchable struct {
	mu sync.Mutex
	b  attester.Backend
}

func (s *switchable) set(b attester.Backend) { s.mu.Lock(); s.b = b; s.mu.Unlock() }
func (s *switchable) Name() string           { return "switchable" }
func (s *switchable) Evidence(ctx context.Context, rd [nonce.Size]byte) (*attester.Evidence, error) {
	return s.get().Evidence(ctx, rd)
}

// Devices states the devices of the backend, if it states any.
func (s *switchable) Devices() []v1alpha1.GPUDevice {
	if ds, ok := s.get().(attester.DeviceStater); ok {
		return ds.Devices()
	}
	return nil
}

func (s *switchable) get() attester.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// forging signs another node's nonce whatever it is asked, as a
// malicious attester replaying or forging answers would.
type forging struct{ lab *attester.Lab }

func (f forging) Name() string { return "forging" }
func (f forging) Evidence(ctx context.Context, _ [nonce.Size]byte) (*attester.Evidence, error) {
	return f.lab.Evidence(ctx, nonce.For("another-node", "its-incarnation", nonce.NewChallenge()))
}

// labNode is a node with an attester pod and the attester it points at.
type labNode struct {
	node    *corev1.Node
	pod     *corev1.Pod
	backend *switchable
	server  *http.Server
}

// newFixture creates node name with boot ID boot-1, and an attester pod on
// it served by an in-process lab attester stating measurement.
func newFixture(t *testing.T, name string, measurement [48]byte) *labNode {
	t.Helper()
	f := &labNode{backend: &switchable{b: &attester.Lab{Chain: labChain(t), Measurement: measurement}}}
	srv, err := attester.New(attester.Config{Backend: f.backend})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetReady(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.server = &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.server.Serve(ln) }()
	t.Cleanup(func() { _ = f.server.Close() })

	f.node = createNode(t, name, "boot-1")
	ensureNamespace(t, attesterNS)
	f.pod = fixture.MakePod("attester-"+name, attesterNS).Label("app.kubernetes.io/name", "xila-guard-attester").NodeName(name).Obj()
	f.pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: controller.AttesterPortName, ContainerPort: int32(ln.Addr().(*net.TCPAddr).Port)}}
	createRunningPod(t, f.pod)
	return f
}

func createNode(t *testing.T, name, boot string) *corev1.Node {
	t.Helper()
	// Labelled into pool acme, untainted: no test here needs the pool taint.
	n := fixture.MakeNode(name).Label(guard.LabelTenantPool, "acme").Obj()
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	setBootID(t, n, boot)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	return n
}

func setBootID(t *testing.T, n *corev1.Node, boot string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.NodeInfo.BootID = boot
		return k8s.Status().Update(context.Background(), n)
	}); err != nil {
		t.Fatal(err)
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := k8s.Create(context.Background(), fixture.MakeNamespace(name).Obj())
	if err != nil && client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// createRunningPod creates pod and reports it running and ready on the
// loopback address, as a kubelet would.
func createRunningPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
}

func getState(t *testing.T, name string) (*v1alpha1.NodeSecurityState, error) {
	t.Helper()
	nss := &v1alpha1.NodeSecurityState{}
	return nss, k8s.Get(context.Background(), client.ObjectKey{Name: name}, nss)
}

// waitState waits until the node's state passes check.
func waitState(t *testing.T, name string, timeout time.Duration, check func(*v1alpha1.NodeSecurityState) error) *v1alpha1.NodeSecurityState {
	t.Helper()
	var nss *v1alpha1.NodeSecurityState
	eventually(t, timeout, func() error {
		var err error
		if nss, err = getState(t, name); err != nil {
			return err
		}
		return check(nss)
	})
	return nss
}

func verdict(want v1alpha1.AttestationVerdict, reason guard.Reason) func(*v1alpha1.NodeSecurityState) error {
	return func(nss *v1alpha1.NodeSecurityState) error {
		tee := nss.Spec.TEE
		if tee == nil || tee.Attestation == nil || tee.Attestation.Verdict != want || tee.Attestation.Reason != reason {
			return fmt.Errorf("tee %+v, want %s %s", tee, want, reason)
		}
		return nil
	}
}

func challenge(t *testing.T, c *running, node string) (int, string) {
	t.Helper()
	resp, err := http.Post(c.challengeURL+node, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestIntegrationAttestsLabNode: the controller attests a node served by a
// lab attester, refreshes the evidence, and challenges it on demand.
func TestIntegrationAttestsLabNode(t *testing.T) {
	c := startController(t)
	f := newFixture(t, "attest-pass", allowed)
	nss := waitState(t, "attest-pass", 30*time.Second, verdict(v1alpha1.AttestationPassed, ""))
	lab := labChain(t)
	tee := nss.Spec.TEE
	if nss.Spec.Source != v1alpha1.SourceAttested || !nss.Spec.Complete || nss.Spec.NodeUID != f.node.UID ||
		nss.Spec.Incarnation != controller.Incarnation(f.node, f.pod) {
		t.Errorf("spec %+v", nss.Spec)
	}
	if tee.Type != v1alpha1.TEESEVSNP || tee.Measurement != measurementOf(allowed) || tee.ChipID != hex.EncodeToString(lab.ChipID[:]) ||
		tee.SNPTCB == nil || tee.SNPTCB.SNP != int32(lab.TCB.SNP) || tee.HostData != strings.Repeat("0", 64) ||
		tee.Attestation.RootOfTrust != v1alpha1.RootLab || tee.Attestation.Verifier != controller.DefaultVerifierName {
		t.Errorf("tee %+v, attestation %+v", tee, tee.Attestation)
	}
	if refs := nss.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != f.node.UID {
		t.Errorf("owner references %+v", refs)
	}
	if nss.Labels[guard.LabelTenantPool] != "acme" {
		t.Errorf("labels %v", nss.Labels)
	}

	// The evidence is refreshed every interval.
	first := nss.Spec.ObservedAt
	waitState(t, "attest-pass", 4*interval, func(n *v1alpha1.NodeSecurityState) error {
		if !n.Spec.ObservedAt.After(first.Time) {
			return fmt.Errorf("observedAt still %s", n.Spec.ObservedAt)
		}
		return nil
	})

	// A synchronous challenge returns once the fresh state is written.
	time.Sleep(time.Second) // observedAt has a resolution of one second
	before, _ := getState(t, "attest-pass")
	start := time.Now()
	code, body := challenge(t, c, "attest-pass")
	took := time.Since(start)
	after, _ := getState(t, "attest-pass")
	if code != 200 || !strings.Contains(body, `"verdict":"Passed"`) || !after.Spec.ObservedAt.After(before.Spec.ObservedAt.Time) {
		t.Errorf("challenge: %d %s; observedAt %s, was %s", code, body, after.Spec.ObservedAt, before.Spec.ObservedAt)
	}
	t.Logf("synchronous challenge took %s", took)
	if code, _ := challenge(t, c, "no-such-node"); code != 404 {
		t.Errorf("challenge of a missing node: %d", code)
	}

	metrics := scrape(t, c)
	for _, want := range []string{`xila_guard_attest_attestations_total{reason="NONE",result="passed"}`,
		`xila_guard_attest_evidence_age_seconds{node="attest-pass"}`, "xila_guard_attest_verification_duration_seconds_count"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestIntegrationTamperedMeasurement: an attester whose launch measurement
// no reference value allows gets a Failed verdict, its measurement
// recorded, and an Event on its state.
func TestIntegrationTamperedMeasurement(t *testing.T) {
	startController(t)
	newFixture(t, "attest-tampered", tampered)
	nss := waitState(t, "attest-tampered", 30*time.Second, verdict(v1alpha1.AttestationFailed, guard.ReasonMeasurementNotAllowed))
	if nss.Spec.TEE.Measurement != measurementOf(tampered) {
		t.Errorf("measurement %s, want the attester's %s", nss.Spec.TEE.Measurement, measurementOf(tampered))
	}
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "NodeSecurityState" && e.Regarding.Name == "attest-tampered" && e.Type == corev1.EventTypeWarning &&
				e.Reason == string(guard.ReasonMeasurementNotAllowed) && strings.Contains(e.Note, "attestation failed") {
				return nil
			}
		}
		return fmt.Errorf("no MEASUREMENT_NOT_ALLOWED event among %d", len(list.Items))
	})
}

// TestIntegrationStoppedAttester: once the attester stops answering, the
// evidence is no longer refreshed and grows stale.
func TestIntegrationStoppedAttester(t *testing.T) {
	c := startController(t)
	f := newFixture(t, "attest-stopped", allowed)
	waitState(t, "attest-stopped", 30*time.Second, verdict(v1alpha1.AttestationPassed, ""))
	if err := f.server.Close(); err != nil {
		t.Fatal(err)
	}
	// A refresh in flight may still land: take the state once it settles.
	time.Sleep(interval)
	stopped, _ := getState(t, "attest-stopped")
	time.Sleep(3 * interval)
	later, _ := getState(t, "attest-stopped")
	if !later.Spec.ObservedAt.Equal(&stopped.Spec.ObservedAt) || later.ResourceVersion != stopped.ResourceVersion {
		t.Errorf("observedAt advanced from %s to %s with the attester stopped", stopped.Spec.ObservedAt, later.Spec.ObservedAt)
	}
	if code, body := challenge(t, c, "attest-stopped"); code != http.StatusBadGateway {
		t.Errorf("challenge with the attester stopped: %d %s", code, body)
	}
	if metrics := scrape(t, c); !strings.Contains(metrics, `xila_guard_attest_attestations_total{reason="NONE",result="unreachable"}`) {
		t.Error("no unreachable attestations counted")
	}
}

// TestIntegrationRechallenge: a reboot (boot ID), a new attester pod and a
// node re-created under the same name each get a fresh challenge bound to
// the new identity.
func TestIntegrationRechallenge(t *testing.T) {
	startController(t)
	f := newFixture(t, "attest-again", allowed)
	first := waitState(t, "attest-again", 30*time.Second, verdict(v1alpha1.AttestationPassed, ""))

	setBootID(t, f.node, "boot-2")
	rebooted := controller.Incarnation(f.node, f.pod)
	if rebooted == first.Spec.Incarnation {
		t.Fatal("a reboot does not change the incarnation")
	}
	waitState(t, "attest-again", 10*time.Second, func(n *v1alpha1.NodeSecurityState) error {
		if n.Spec.Incarnation != rebooted {
			return fmt.Errorf("incarnation %s, want %s", n.Spec.Incarnation, rebooted)
		}
		return verdict(v1alpha1.AttestationPassed, "")(n)
	})

	if err := k8s.Delete(context.Background(), f.node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.node), &corev1.Node{})
		if client.IgnoreNotFound(err) != nil || err == nil {
			return errors.New("the node is still there")
		}
		return nil
	})
	again := createNode(t, "attest-again", "boot-1")
	waitState(t, "attest-again", 10*time.Second, func(n *v1alpha1.NodeSecurityState) error {
		if n.Spec.NodeUID != again.UID || n.Spec.Incarnation != controller.Incarnation(again, f.pod) {
			return fmt.Errorf("node UID %s incarnation %s, want %s %s", n.Spec.NodeUID, n.Spec.Incarnation, again.UID, controller.Incarnation(again, f.pod))
		}
		if refs := n.OwnerReferences; len(refs) != 1 || refs[0].UID != again.UID {
			return fmt.Errorf("owner references %+v", refs)
		}
		return verdict(v1alpha1.AttestationPassed, "")(n)
	})
}

// TestIntegrationWrongNonce: a malicious attester that answers with
// evidence made for another challenge gets NONCE_MISMATCH.
func TestIntegrationWrongNonce(t *testing.T) {
	startController(t)
	f := newFixture(t, "attest-forged", allowed)
	f.backend.set(forging{lab: &attester.Lab{Chain: labChain(t), Measurement: allowed}})
	nss := waitState(t, "attest-forged", 30*time.Second, verdict(v1alpha1.AttestationFailed, guard.ReasonNonceMismatch))
	if nss.Spec.TEE.Measurement != "" {
		t.Errorf("a measurement %s from evidence that proves nothing", nss.Spec.TEE.Measurement)
	}
}

// TestIntegrationRelayToAnotherChip: a node first attested on its own chip
// whose challenges then reach another machine's TEE, under the same root,
// gets CHIP_ID_CHANGED.
func TestIntegrationRelayToAnotherChip(t *testing.T) {
	t.Run("G-ATTESTATION-REPORT a challenge relayed to another chip is CHIP_ID_CHANGED", testRelayToAnotherChip)
}

func testRelayToAnotherChip(t *testing.T) {
	startController(t)
	f := newFixture(t, "attest-relay", allowed)
	own := waitState(t, "attest-relay", 30*time.Second, verdict(v1alpha1.AttestationPassed, "")).Spec.TEE.ChipID

	other := *labChain(t)
	other.ChipID[0] ^= 0xff
	elsewhere, err := other.AtTCB(other.TCB, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.backend.set(&attester.Lab{Chain: elsewhere, Measurement: allowed})
	nss := waitState(t, "attest-relay", 4*interval, verdict(v1alpha1.AttestationFailed, guard.ReasonChipIDChanged))
	if nss.Spec.TEE.ChipID != own || nss.Spec.TEE.Measurement != "" {
		t.Errorf("chip %s (want the node's own %s), measurement %q", nss.Spec.TEE.ChipID, own, nss.Spec.TEE.Measurement)
	}
}

func scrape(t *testing.T, c *running) string {
	t.Helper()
	resp, err := http.Get(c.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
