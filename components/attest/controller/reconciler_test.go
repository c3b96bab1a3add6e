package controller

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	attested := func(mutate func(*v1alpha1.NodeSecurityStateSpec)) *v1alpha1.NodeSecurityState {
		nss := &v1alpha1.NodeSecurityState{Spec: v1alpha1.NodeSecurityStateSpec{NodeUID: "uid", Incarnation: "inc",
			ObservedAt: metav1.NewTime(now.Add(-20 * time.Second)), Source: v1alpha1.SourceAttested}}
		mutate(&nss.Spec)
		return nss
	}
	for _, tc := range []struct {
		name     string
		nss      *v1alpha1.NodeSecurityState
		why      string
		wantWait time.Duration
	}{
		{"no evidence", nil, "the node has no evidence", 0},
		{"published evidence", attested(func(s *v1alpha1.NodeSecurityStateSpec) { s.Source = v1alpha1.SourceNFD }), "the evidence is from source nfd", 0},
		{"another node", attested(func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "old" }), "the node UID changed", 0},
		{"another incarnation", attested(func(s *v1alpha1.NodeSecurityStateSpec) { s.Incarnation = "old" }), "the incarnation changed", 0},
		{"fresh", attested(func(*v1alpha1.NodeSecurityStateSpec) {}), "", 40 * time.Second},
		{"due", attested(func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt = metav1.NewTime(now.Add(-time.Minute)) }), "the evidence is due", 0},
		{"from the future", attested(func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt = metav1.NewTime(now.Add(time.Second)) }), "the evidence is due", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, wait := due(tc.nss, "uid", "inc", now, time.Minute)
			if why != tc.why || wait != tc.wantWait {
				t.Errorf("due = %q, %s; want %q, %s", why, wait, tc.why, tc.wantWait)
			}
		})
	}
}

func TestIncarnationChangesWithEachSource(t *testing.T) {
	n, p := node("n", "uid", "boot"), attesterPod("a", "n", "pod")
	base := Incarnation(n, p)
	if len(base) != 16 || base != Incarnation(n.DeepCopy(), p.DeepCopy()) {
		t.Fatalf("Incarnation = %q, not 16 stable hex digits", base)
	}
	for name, inc := range map[string]string{
		"node UID": Incarnation(node("n", "uid2", "boot"), p),
		"boot ID":  Incarnation(node("n", "uid", "boot2"), p),
		"attester": Incarnation(n, attesterPod("a", "n", "pod2")),
	} {
		if inc == base {
			t.Errorf("another %s gives the same incarnation", name)
		}
	}
}

func TestReconcileWritesVerifiedEvidence(t *testing.T) {
	g := newRig(t)
	g.lab.HostData[0] = 0x42
	res := g.reconcile()
	if res.RequeueAfter != DefaultInterval {
		t.Errorf("RequeueAfter %s, want %s", res.RequeueAfter, DefaultInterval)
	}
	nss := g.state()
	if nss == nil {
		t.Fatal("no state written")
	}
	c := chain(t)
	at := metav1.NewTime(g.clock.Now())
	want := v1alpha1.NodeSecurityStateSpec{
		NodeUID: "uid-1", Incarnation: Incarnation(g.node, g.pod), ObservedAt: at, Source: v1alpha1.SourceAttested, Complete: true,
		TEE: &v1alpha1.TEEFacts{
			Type: v1alpha1.TEESEVSNP, Measurement: workloadRef, HostData: "42" + strings.Repeat("0", 62),
			SNPTCB: &v1alpha1.SNPTCB{BootLoader: int32(c.TCB.BootLoader), TEE: int32(c.TCB.TEE), SNP: int32(c.TCB.SNP), Microcode: int32(c.TCB.Microcode)},
			ChipID: hex.EncodeToString(c.ChipID[:]),
			Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: at, Verifier: DefaultVerifierName,
				RootOfTrust: v1alpha1.RootLab},
		},
	}
	if diff := cmp.Diff(want, nss.Spec); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if nss.Labels[guard.LabelTenantPool] != testPool {
		t.Errorf("labels %v", nss.Labels)
	}
	if refs := nss.OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-1" || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("owner references %+v", refs)
	}
	if got := g.fetcher.urls; len(got) != 1 || got[0] != "http://10.0.0.7:9443" {
		t.Errorf("attester URLs %v", got)
	}
	if ev := g.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal AttestationPassed ") {
		t.Errorf("events %q", ev)
	}

	// Fresh evidence is left alone until it is due.
	g.clock.SetTime(g.clock.Now().Add(20 * time.Second))
	if res := g.reconcile(); res.RequeueAfter != 40*time.Second || g.fetcher.calls.Load() != 1 {
		t.Errorf("fresh evidence: RequeueAfter %s after %d challenges", res.RequeueAfter, g.fetcher.calls.Load())
	}
	g.clock.SetTime(g.clock.Now().Add(40 * time.Second))
	g.reconcile()
	if got := g.state().Spec.ObservedAt; g.fetcher.calls.Load() != 2 || !got.Equal(&metav1.Time{Time: g.clock.Now()}) {
		t.Errorf("due evidence: %d challenges, observedAt %s", g.fetcher.calls.Load(), got)
	}
	if ev := g.events(); len(ev) != 0 {
		t.Errorf("a second pass recorded events %q", ev)
	}
}

func TestReconcileRefusals(t *testing.T) {
	c := chain(t)
	otherChip := hex.EncodeToString(append([]byte{0xee}, c.ChipID[1:]...))
	pinned := func(chip string) *v1alpha1.NodeSecurityState {
		return &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: "uid-1", Incarnation: "old", ObservedAt: metav1.Now(), Source: v1alpha1.SourceAttested, Complete: true,
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, ChipID: chip},
		}}
	}
	for _, tc := range []struct {
		name   string
		setup  func(g *rig)
		reason guard.Reason
		// facts says whether the verified facts are written.
		facts bool
		chip  string
	}{
		{name: "measurement not allowed", setup: func(g *rig) { g.lab.Measurement[0] ^= 1 }, reason: guard.ReasonMeasurementNotAllowed, facts: true},
		{name: "debug policy", setup: func(g *rig) { g.lab.Policy = labtee.DefaultPolicy | labtee.PolicyDebug }, reason: guard.ReasonDebugPolicy, facts: true},
		{name: "TCB below the minimum", setup: func(g *rig) {
			g.r.References = StaticReferences{Measurements: []verify.Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: workloadRef}},
				MinSNPTCB: evidence.SNPTCB{SNP: c.TCB.SNP + 1}}
		}, reason: guard.ReasonTCBOutOfDate, facts: true},
		{name: "reference expired", setup: func(g *rig) {
			g.r.References = StaticReferences{Measurements: []verify.Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: workloadRef,
				NotAfter: g.clock.Now().Add(-time.Second)}}}
		}, reason: guard.ReasonMeasurementExpired, facts: true},
		{name: "wrong nonce", setup: func(g *rig) { g.fetcher.tamper = otherNonce }, reason: guard.ReasonNonceMismatch},
		{name: "lab root under production", setup: func(g *rig) { g.r.Profile = guard.ProfileProduction }, reason: guard.ReasonTestRootOfTrust},
		{name: "flipped byte", setup: func(g *rig) {
			g.fetcher.tamper = func(_ *attester.Request, ev *attester.Evidence) {
				if ev != nil {
					ev.Data[0x90] ^= 1 // inside MEASUREMENT
				}
			}
		}, reason: guard.ReasonQuoteInvalid},
		{name: "stale challenge", setup: func(g *rig) {
			later := func() time.Time { return g.clock.Now().Add(verify.DefaultMaxChallengeAge + time.Second) }
			v, err := verify.New(verify.Options{LabSNPRoot: c.RootPEM(), Clock: later})
			if err != nil {
				t.Fatal(err)
			}
			g.r.Verifier = v
		}, reason: guard.ReasonAttestationStale},
		{name: "another chip", setup: func(g *rig) {
			if err := g.client.Create(context.Background(), pinned(otherChip)); err != nil {
				t.Fatal(err)
			}
		}, reason: guard.ReasonChipIDChanged, chip: otherChip},
		{name: "another chip and a measurement not allowed", setup: func(g *rig) {
			g.lab.Measurement[0] ^= 1
			if err := g.client.Create(context.Background(), pinned(otherChip)); err != nil {
				t.Fatal(err)
			}
		}, reason: guard.ReasonChipIDChanged, chip: otherChip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			tc.setup(g)
			g.reconcile()
			nss := g.state()
			if nss == nil {
				t.Fatal("no state written")
			}
			tee := nss.Spec.TEE
			if a := tee.Attestation; a.Verdict != v1alpha1.AttestationFailed || a.Reason != tc.reason ||
				!strings.HasPrefix(a.Message, string(tc.reason)+": ") {
				t.Errorf("attestation %+v, want Failed with %s", a, tc.reason)
			}
			// Only evidence whose facts are kept names the root it chains to.
			if wantRoot := map[bool]v1alpha1.RootOfTrust{true: v1alpha1.RootLab}[tc.facts]; tee.Attestation.RootOfTrust != wantRoot {
				t.Errorf("root of trust %q, want %q", tee.Attestation.RootOfTrust, wantRoot)
			}
			if nss.Spec.Source != v1alpha1.SourceAttested || !nss.Spec.Complete || tee.Type != v1alpha1.TEESEVSNP {
				t.Errorf("spec %+v", nss.Spec)
			}
			if got := tee.Measurement != "" && tee.SNPTCB != nil && tee.HostData != ""; got != tc.facts {
				t.Errorf("facts written: %v, want %v (%+v)", got, tc.facts, tee)
			}
			if tc.facts && tee.Measurement != sha384(g.lab.Measurement[:]) {
				t.Errorf("measurement %s is not the attester's", tee.Measurement)
			}
			wantChip := tc.chip
			if tc.facts {
				wantChip = hex.EncodeToString(c.ChipID[:])
			}
			if tee.ChipID != wantChip {
				t.Errorf("chip ID %q, want %q", tee.ChipID, wantChip)
			}
			if ev := g.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+string(tc.reason)+" attestation failed: ") {
				t.Errorf("events %q", ev)
			}
		})
	}
}

// TestReconcileChipPinIsPerNodeUID: a node re-created under the same name
// is another node, bound to the chip of its own first evidence.
func TestReconcileChipPinIsPerNodeUID(t *testing.T) {
	g := newRig(t, &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1alpha1.NodeSecurityStateSpec{
		NodeUID: "uid-0", Incarnation: "old", ObservedAt: metav1.Now(), Source: v1alpha1.SourceAttested, Complete: true,
		TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, ChipID: strings.Repeat("ee", 64)},
	}})
	g.reconcile()
	if a := g.state().Spec.TEE.Attestation; a.Verdict != v1alpha1.AttestationPassed {
		t.Errorf("attestation %+v, want Passed", a)
	}
}

// TestReconcileKeepsPinThroughFailures: evidence that proves nothing does
// not unbind the node from its chip.
func TestReconcileKeepsPinThroughFailures(t *testing.T) {
	g := newRig(t)
	g.reconcile()
	chip := g.state().Spec.TEE.ChipID
	g.fetcher.tamper = otherNonce
	g.clock.SetTime(g.clock.Now().Add(time.Minute))
	g.reconcile()
	if tee := g.state().Spec.TEE; tee.Attestation.Reason != guard.ReasonNonceMismatch || tee.ChipID != chip {
		t.Errorf("after a failure: reason %s, chip %q, want %q", tee.Attestation.Reason, tee.ChipID, chip)
	}
}

func TestReconcileUnreachableAttesterLeavesEvidence(t *testing.T) {
	g := newRig(t)
	g.reconcile()
	before := g.state()
	g.fetcher.err = errors.New("connection refused")
	g.clock.SetTime(g.clock.Now().Add(2 * time.Minute))
	res := g.reconcile()
	if res.RequeueAfter != DefaultRetryInterval {
		t.Errorf("RequeueAfter %s, want %s", res.RequeueAfter, DefaultRetryInterval)
	}
	if after := g.state(); after.ResourceVersion != before.ResourceVersion || !after.Spec.ObservedAt.Equal(&before.Spec.ObservedAt) {
		t.Errorf("the state changed: observedAt %s -> %s", before.Spec.ObservedAt, after.Spec.ObservedAt)
	}
	if ev := g.events(); len(ev) != 1 {
		t.Errorf("events %q", ev)
	}
}

func TestReconcileWithoutAttester(t *testing.T) {
	for name, mutate := range map[string]func(*corev1.Pod){
		"not ready":     func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		"no IP":         func(p *corev1.Pod) { p.Status.PodIP = "" },
		"pending":       func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
		"on other node": func(p *corev1.Pod) { p.Spec.NodeName = "node-2" },
		"not selected":  func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} },
		"elsewhere":     func(p *corev1.Pod) { p.Namespace = "default" },
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t)
			if err := g.client.Delete(context.Background(), g.pod); err != nil {
				t.Fatal(err)
			}
			p := attesterPod("attester-b", "node-1", "pod-uid-2")
			mutate(p)
			if err := g.client.Create(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if res := g.reconcile(); res.RequeueAfter != 0 || g.fetcher.calls.Load() != 0 || g.state() != nil {
				t.Errorf("RequeueAfter %s, %d challenges, state %v", res.RequeueAfter, g.fetcher.calls.Load(), g.state())
			}
		})
	}
}

func TestReconcileNewestAttester(t *testing.T) {
	newer := attesterPod("attester-b", "node-1", "pod-uid-2")
	newer.CreationTimestamp = metav1.NewTime(newer.CreationTimestamp.Add(time.Hour))
	newer.Status.PodIP = "10.0.0.8"
	g := newRig(t, newer)
	g.reconcile()
	if g.fetcher.urls[0] != "http://10.0.0.8:9443" || g.state().Spec.Incarnation != Incarnation(g.node, newer) {
		t.Errorf("challenged %v, incarnation %s", g.fetcher.urls, g.state().Spec.Incarnation)
	}
}

func TestReconcileRechallengesNewIncarnation(t *testing.T) {
	g := newRig(t)
	g.reconcile()
	first := g.state().Spec.Incarnation

	g.update(g.node, func() { g.node.Status.NodeInfo.BootID = "boot-2" })
	g.reconcile()
	rebooted := g.state().Spec.Incarnation
	if g.fetcher.calls.Load() != 2 || rebooted == first || rebooted != Incarnation(g.node, g.pod) {
		t.Errorf("after a reboot: %d challenges, incarnation %s (was %s)", g.fetcher.calls.Load(), rebooted, first)
	}

	if err := g.client.Delete(context.Background(), g.pod); err != nil {
		t.Fatal(err)
	}
	replaced := attesterPod("attester-b", "node-1", "pod-uid-2")
	if err := g.client.Create(context.Background(), replaced); err != nil {
		t.Fatal(err)
	}
	g.reconcile()
	if got := g.state().Spec.Incarnation; g.fetcher.calls.Load() != 3 || got != Incarnation(g.node, replaced) {
		t.Errorf("after a new attester: %d challenges, incarnation %s", g.fetcher.calls.Load(), got)
	}
}

// TestReconcileTakesOverStates: attested evidence replaces what the
// evidence publisher wrote, and a state of an earlier node of the same
// name passes to the new one.
func TestReconcileTakesOverStates(t *testing.T) {
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-0"}}
	published := &v1alpha1.NodeSecurityState{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{guard.LabelTenantPool: "globex"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: old.UID, Controller: ptr.To(true)}}},
		Spec: v1alpha1.NodeSecurityStateSpec{NodeUID: old.UID, Incarnation: "x", ObservedAt: metav1.Now(), Source: v1alpha1.SourceNFD, Complete: true,
			Devices: []v1alpha1.GPUDevice{{ID: "GPU-0"}}},
	}
	g := newRig(t, published)
	g.reconcile()
	nss := g.state()
	if nss.Spec.Source != v1alpha1.SourceAttested || nss.Spec.NodeUID != "uid-1" || len(nss.Spec.Devices) != 0 {
		t.Errorf("spec %+v", nss.Spec)
	}
	if refs := nss.OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-1" {
		t.Errorf("owner references %+v", refs)
	}
	if nss.Labels[guard.LabelTenantPool] != testPool {
		t.Errorf("labels %v", nss.Labels)
	}
}

func TestReconcileReferenceErrorWritesNothing(t *testing.T) {
	g := newRig(t)
	g.r.References = &ReferenceFile{Path: t.TempDir() + "/missing.yaml"}
	if res := g.reconcile(); res.RequeueAfter != DefaultRetryInterval || g.state() != nil || g.fetcher.calls.Load() != 0 {
		t.Errorf("RequeueAfter %s, state %v, %d challenges", res.RequeueAfter, g.state(), g.fetcher.calls.Load())
	}
}

func TestReconcileDeletedNode(t *testing.T) {
	g := newRig(t)
	g.reconcile()
	if err := g.client.Delete(context.Background(), g.node); err != nil {
		t.Fatal(err)
	}
	if res := g.reconcile(); res.RequeueAfter != 0 || g.fetcher.calls.Load() != 1 {
		t.Errorf("RequeueAfter %s after %d challenges", res.RequeueAfter, g.fetcher.calls.Load())
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got := truncate(long)
	if len(got) > maxMessage || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("truncate gave %d bytes", len(got))
	}
	if truncate("short") != "short" {
		t.Error("a short message changed")
	}
}

// TestReconcileEPCSizeOnlyFromVerifiedEvidence: the EPC size an attester
// states beside its report is written with the facts of evidence that
// verified (passed, or refused only by the reference values) and never
// with evidence that proves nothing; an attester that stops stating it
// takes it away at its next attestation.
func TestReconcileEPCSizeOnlyFromVerifiedEvidence(t *testing.T) {
	const size = 64 << 20
	c := chain(t)
	for _, tc := range []struct {
		name  string
		setup func(g *rig)
		kept  bool
	}{
		{name: "passed", setup: func(*rig) {}, kept: true},
		{name: "measurement not allowed", setup: func(g *rig) { g.lab.Measurement[0] ^= 1 }, kept: true},
		{name: "debug policy", setup: func(g *rig) { g.lab.Policy = labtee.DefaultPolicy | labtee.PolicyDebug }, kept: true},
		{name: "wrong nonce", setup: func(g *rig) { g.fetcher.tamper = otherNonce }},
		{name: "lab root under production", setup: func(g *rig) { g.r.Profile = guard.ProfileProduction }},
		{name: "flipped byte", setup: func(g *rig) {
			g.fetcher.tamper = func(_ *attester.Request, ev *attester.Evidence) {
				if ev != nil {
					ev.Data[0x90] ^= 1
				}
			}
		}},
		{name: "another chip", setup: func(g *rig) {
			other := hex.EncodeToString(append([]byte{0xee}, c.ChipID[1:]...))
			if err := g.client.Create(context.Background(), &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
				Spec: v1alpha1.NodeSecurityStateSpec{NodeUID: "uid-1", Incarnation: "old", ObservedAt: metav1.Now(), Source: v1alpha1.SourceAttested,
					Complete: true, TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, ChipID: other}}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			g.lab.EPCSize = size
			tc.setup(g)
			g.reconcile()
			got := g.state().Spec.TEE.EPCSize
			switch {
			case tc.kept && (got == nil || got.Value() != size):
				t.Errorf("epcSize %v, want %d bytes", got, size)
			case !tc.kept && got != nil:
				t.Errorf("epcSize %v from evidence that proves nothing (%s)", got, g.state().Spec.TEE.Attestation.Reason)
			}
		})
	}
	t.Run("no longer stated", func(t *testing.T) {
		g := newRig(t)
		g.lab.EPCSize = size
		g.reconcile()
		if got := g.state().Spec.TEE.EPCSize; got == nil || got.String() != "64Mi" {
			t.Fatalf("epcSize %v, want 64Mi", got)
		}
		g.lab.EPCSize = 0
		g.clock.SetTime(g.clock.Now().Add(time.Minute))
		g.reconcile()
		if got := g.state().Spec.TEE.EPCSize; got != nil {
			t.Errorf("epcSize %v after the attester stopped stating it", got)
		}
	})
}

// TestReconcileAttestedDevices: the GPUs the TEE states are written only
// from evidence that verified and binds them, each named as the DRA
// device whose slice on the node states its UUID.
func TestReconcileAttestedDevices(t *testing.T) {
	gpus := []v1alpha1.GPUDevice{
		{ID: "GPU-aaaa", Vendor: "nvidia", Model: "Example GPU", CCMode: v1alpha1.CCModeOn},
		{ID: "GPU-bbbb", Vendor: "nvidia", Model: "Example GPU", CCMode: v1alpha1.CCModeOn},
	}
	slices := func() []client.Object {
		own := fixture.MakeResourceSlice("node-1", "gpu.example.com").GPU("gpu-1", "GPU-aaaa", "Example GPU").GPU("gpu-0", "GPU-zzzz", "Example GPU").Obj()
		// Another driver's slice on the node states the same GPU: the
		// first by driver, pool and device names it.
		vfio := fixture.MakeResourceSlice("node-1", "gpu.nvidia.com").GPU("gpu-1-vfio", "GPU-aaaa", "Example GPU").Obj()
		// Another node's slice states the node's other GPU: not the node's.
		other := fixture.MakeResourceSlice("node-2", "gpu.example.com").GPU("gpu-0", "GPU-bbbb", "Example GPU").Obj()
		return []client.Object{own, vfio, other}
	}
	dra := func(driver, device string) *v1alpha1.DRADeviceRef {
		return &v1alpha1.DRADeviceRef{Driver: driver, Pool: "node-1", Device: device}
	}
	t.Run("G-ATTESTED-DEVICES verified: each GPU named by its UUID's slice device", func(t *testing.T) {
		g := newRig(t, slices()...)
		g.lab.GPUs = gpus
		g.reconcile()
		s := g.state().Spec
		if s.TEE.Attestation.Verdict != v1alpha1.AttestationPassed {
			t.Fatalf("attestation %+v", s.TEE.Attestation)
		}
		want := []v1alpha1.GPUDevice{gpus[0], gpus[1]}
		want[0].DRA = dra("gpu.example.com", "gpu-1")
		if d := cmp.Diff(want, s.Devices); d != "" {
			t.Errorf("devices (-want +got):\n%s", d)
		}
	})
	for _, tc := range []struct {
		name   string
		tamper func(req *attester.Request, ev *attester.Evidence)
		reason guard.Reason
	}{
		{name: "a GPU added to the answer", reason: guard.ReasonNonceMismatch, tamper: func(_ *attester.Request, ev *attester.Evidence) {
			if ev != nil {
				ev.Devices = append(ev.Devices, v1alpha1.GPUDevice{ID: "GPU-cccc", CCMode: v1alpha1.CCModeOn})
			}
		}},
		{name: "a GPU's CC mode changed in the answer", reason: guard.ReasonNonceMismatch, tamper: func(_ *attester.Request, ev *attester.Evidence) {
			if ev != nil {
				ev.Devices[1].CCMode = v1alpha1.CCModeOff
			}
		}},
		{name: "the GPUs dropped from the answer", reason: guard.ReasonNonceMismatch, tamper: func(_ *attester.Request, ev *attester.Evidence) {
			if ev != nil {
				ev.Devices = nil
			}
		}},
	} {
		t.Run("G-ATTESTED-DEVICES "+tc.name+": refused, and no GPU written", func(t *testing.T) {
			g := newRig(t, slices()...)
			g.lab.GPUs = gpus
			g.fetcher.tamper = tc.tamper
			g.reconcile()
			s := g.state().Spec
			if a := s.TEE.Attestation; a.Verdict != v1alpha1.AttestationFailed || a.Reason != tc.reason {
				t.Errorf("attestation %s %s, want Failed %s", a.Verdict, a.Reason, tc.reason)
			}
			if len(s.Devices) != 0 {
				t.Errorf("devices %+v from evidence that did not verify", s.Devices)
			}
		})
	}
	t.Run("refused by the measurement: no GPU written", func(t *testing.T) {
		g := newRig(t, slices()...)
		g.lab.GPUs = gpus
		g.lab.Measurement[0] ^= 1
		g.reconcile()
		if s := g.state().Spec; s.TEE.Attestation.Verdict != v1alpha1.AttestationFailed || len(s.Devices) != 0 {
			t.Errorf("attestation %s, devices %+v", s.TEE.Attestation.Verdict, s.Devices)
		}
	})
}
