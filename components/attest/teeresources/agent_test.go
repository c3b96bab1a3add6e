package teeresources

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// rig is an agent on a fake API server holding its node, and the patches
// of the node's status it sent.
type rig struct {
	t       *testing.T
	client  client.Client
	agent   *Agent
	patches []string
	fail    error
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	g := &rig{t: t}
	g.client = fake.NewClientBuilder().WithScheme(testScheme(t)).WithStatusSubresource(&corev1.Node{}).
		WithObjects(append([]client.Object{testNode()}, objs...)...).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object,
			patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if g.fail != nil {
				return g.fail
			}
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			g.patches = append(g.patches, sub+" "+string(patch.Type())+" "+string(data))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g.agent = &Agent{Node: "tee-1", Client: g.client, Plugin: &Plugin{Count: 20, Lab: true}, Metrics: m,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return g
}

func (g *rig) sync(force bool) Offer {
	g.t.Helper()
	o, err := g.agent.Sync(context.Background(), force)
	if err != nil {
		g.t.Fatal(err)
	}
	return o
}

// advertised returns the node's EPC capacity and allocatable.
func (g *rig) advertised() (string, string) {
	g.t.Helper()
	n := &corev1.Node{}
	if err := g.client.Get(context.Background(), client.ObjectKey{Name: "tee-1"}, n); err != nil {
		g.t.Fatal(err)
	}
	c, a := n.Status.Capacity[ResourceEPC], n.Status.Allocatable[ResourceEPC]
	return c.String(), a.String()
}

func (g *rig) setState(mutate func(*v1alpha1.NodeSecurityStateSpec)) {
	g.t.Helper()
	nss := &v1alpha1.NodeSecurityState{}
	if err := g.client.Get(context.Background(), client.ObjectKey{Name: "tee-1"}, nss); err != nil {
		g.t.Fatal(err)
	}
	mutate(&nss.Spec)
	if err := g.client.Update(context.Background(), nss); err != nil {
		g.t.Fatal(err)
	}
}

func TestCapacityPatch(t *testing.T) {
	var got map[string]map[string]map[string]string
	if err := json.Unmarshal(CapacityPatch(testEPC), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]map[string]string{"status": {
		"capacity": {"sgx.intel.com/epc": "67108864"}, "allocatable": {"sgx.intel.com/epc": "67108864"}}}
	if !equalJSON(got, want) {
		t.Errorf("patch %s", CapacityPatch(testEPC))
	}
	if s := string(CapacityPatch(0)); !strings.Contains(s, `"capacity":{"sgx.intel.com/epc":"0"}`) {
		t.Errorf("patch of 0: %s", s)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestSyncFollowsTheEvidence: qualifying evidence advertises its EPC size
// and healthy enclaves; evidence that stops qualifying withdraws both;
// what is already advertised is not patched again unless forced.
func TestSyncFollowsTheEvidence(t *testing.T) {
	g := newRig(t, state(nil))
	o := g.sync(false)
	if o.EPC != testEPC || !o.Healthy || !o.Patched || !g.agent.Plugin.Healthy() {
		t.Fatalf("offer %+v, plugin healthy %v", o, g.agent.Plugin.Healthy())
	}
	if c, a := g.advertised(); c != "67108864" || a != "67108864" {
		t.Errorf("capacity %s, allocatable %s", c, a)
	}
	if want := `status application/merge-patch+json {"status":{"allocatable":{"sgx.intel.com/epc":"67108864"},"capacity":{"sgx.intel.com/epc":"67108864"}}}`; len(g.patches) != 1 || g.patches[0] != want {
		t.Errorf("patches %q", g.patches)
	}
	if o := g.sync(false); o.Patched || len(g.patches) != 1 {
		t.Errorf("an advertised size patched again: %+v", o)
	}
	if o := g.sync(true); !o.Patched || len(g.patches) != 2 {
		t.Errorf("a forced sync did not patch: %+v", o)
	}
	if got := testutil.ToFloat64(g.agent.Metrics.epc); got != testEPC {
		t.Errorf("epc metric %v", got)
	}

	// The attestation fails: nothing is offered.
	g.setState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation.Verdict = v1alpha1.AttestationFailed })
	o = g.sync(false)
	if o.EPC != 0 || o.Healthy || !o.Patched || g.agent.Plugin.Healthy() || !strings.Contains(o.Why, "did not pass") {
		t.Errorf("after a failed attestation: %+v", o)
	}
	if c, a := g.advertised(); c != "0" || a != "0" {
		t.Errorf("capacity %s, allocatable %s after a failed attestation", c, a)
	}
	if got := testutil.ToFloat64(g.agent.Metrics.healthy); got != 0 {
		t.Errorf("healthy metric %v", got)
	}

	// It passes again, with a larger EPC.
	g.setState(func(s *v1alpha1.NodeSecurityStateSpec) {
		s.TEE.Attestation.Verdict = v1alpha1.AttestationPassed
		s.TEE.EPCSize = epc("128Mi")
	})
	if o := g.sync(false); o.EPC != 128<<20 || !o.Healthy {
		t.Errorf("after passing again: %+v", o)
	}
	if c, _ := g.advertised(); c != "134217728" {
		t.Errorf("capacity %s", c)
	}

	// The state goes.
	if err := g.client.Delete(context.Background(), state(nil)); err != nil {
		t.Fatal(err)
	}
	if o := g.sync(false); o.EPC != 0 || o.Healthy || !strings.Contains(o.Why, "no NodeSecurityState") {
		t.Errorf("without a state: %+v", o)
	}
}

// TestSyncRepairsCapacity: a capacity someone else changed, or the
// kubelet zeroed, is set back.
func TestSyncRepairsCapacity(t *testing.T) {
	g := newRig(t, state(nil))
	g.sync(false)
	n := &corev1.Node{}
	if err := g.client.Get(context.Background(), client.ObjectKey{Name: "tee-1"}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Allocatable[ResourceEPC] = resource.MustParse("0")
	if err := g.client.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if o := g.sync(false); !o.Patched {
		t.Errorf("a zeroed allocatable was not repaired: %+v", o)
	}
	if _, a := g.advertised(); a != "67108864" {
		t.Errorf("allocatable %s", a)
	}
}

func TestSyncWithoutEnclaveDevice(t *testing.T) {
	g := newRig(t, state(nil))
	g.agent.Plugin = &Plugin{Count: 20, DevDir: t.TempDir()}
	if o := g.sync(false); o.EPC != 0 || o.Healthy || !strings.Contains(o.Why, "no /dev/sgx_enclave") {
		t.Errorf("a host without the enclave device: %+v", o)
	}
}

func TestSyncErrors(t *testing.T) {
	g := newRig(t, state(nil))
	g.agent.Node = "elsewhere"
	if _, err := g.agent.Sync(context.Background(), false); err == nil {
		t.Error("no error for a missing node")
	}
	g = newRig(t, state(nil))
	g.fail = errors.New("forbidden")
	if _, err := g.agent.Sync(context.Background(), false); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a failed patch: %v", err)
	}
	if got := testutil.ToFloat64(g.agent.Metrics.patches.WithLabelValues("error")); got != 1 {
		t.Errorf("error patches %v", got)
	}
}

// TestRunFollowsKicksAndWithdrawsOnExit: Run advertises at once, follows
// a kick after the evidence changes and sets the EPC to 0 when it stops.
func TestRunFollowsKicksAndWithdrawsOnExit(t *testing.T) {
	g := newRig(t, state(nil))
	g.agent.Plugin = nil
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.agent.Run(ctx) }()
	waitFor(t, "the EPC advertised", func() bool { c, _ := g.advertised(); return c == "67108864" })
	g.setState(func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "uid-0" })
	g.agent.Kick(false)
	waitFor(t, "the EPC withdrawn", func() bool { c, _ := g.advertised(); return c == "0" })
	g.setState(func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "uid-1" })
	g.agent.Registered()
	waitFor(t, "the EPC advertised again", func() bool { c, _ := g.advertised(); return c == "67108864" })
	if got := testutil.ToFloat64(g.agent.Metrics.registrations); got != 1 {
		t.Errorf("registrations %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c, a := g.advertised(); c != "0" || a != "0" {
		t.Errorf("after Run: capacity %s, allocatable %s; want 0", c, a)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
