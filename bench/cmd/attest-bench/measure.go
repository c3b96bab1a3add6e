package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/google/go-sev-guest/abi"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/bench/internal/openloop"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/controller"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// The measures, each group's baselines first.
const (
	mNodeRead   = "node read"
	mRead       = "fresh read"
	mChallenge  = "re-challenge"
	mSignatures = "signature checks"
	mVerify     = "Verify"
	mWrites     = "state writes"
	mController = "controller"
)

var (
	latencyMeasures = []string{mNodeRead, mRead, mChallenge, mSignatures, mVerify}
	fleetMeasures   = []string{mWrites, mController}
)

// measure is one measure of a round.
type measure struct {
	name string
	run  func(ctx context.Context, r *round) error
}

// pairs are the measures beside their baselines, in groups.
func (b *bench) pairs() [][]measure {
	latency := func(name string, n int, one func(ctx context.Context, i int) error) measure {
		return measure{name, func(ctx context.Context, r *round) error {
			var err error
			r.samples[name], err = oneAtATime(ctx, n, one)
			return err
		}}
	}
	fleet := func(name string, f func(ctx context.Context) (pass, error)) measure {
		return measure{name, func(ctx context.Context, r *round) error {
			var err error
			r.fleet[name], err = f(ctx)
			return err
		}}
	}
	return [][]measure{
		{latency(mNodeRead, b.o.requests, b.readNode), latency(mRead, b.o.requests, b.read), latency(mChallenge, b.o.requests, b.rechallenge)},
		{latency(mSignatures, b.o.verifies, b.verify.signatures), latency(mVerify, b.o.verifies, b.verify.verify)},
		{fleet(mWrites, b.writeStates), fleet(mController, b.attestAll)},
	}
}

// oneAtATime calls one n times in a row and times each call.
func oneAtATime(ctx context.Context, n int, one func(ctx context.Context, i int) error) ([]openloop.Sample, error) {
	out := make([]openloop.Sample, 0, n)
	for i := range n {
		start := time.Now()
		if err := one(ctx, i); err != nil {
			return nil, err
		}
		out = append(out, openloop.Sample{FromSend: time.Since(start)})
	}
	return out, nil
}

// read is PreBind's fresh read: a quorum GET of the node's state, with the
// scheduler's client, which must find it Passed.
func (b *bench) read(ctx context.Context, i int) error {
	nss, err := b.gc.NodeSecurityState(ctx, nodeName(i%b.o.nodes))
	if err == nil && !passed(nss) {
		err = fmt.Errorf("the state of %s is not Passed: %+v", nss.Name, nss.Spec.TEE)
	}
	return err
}

// readNode is the baseline of read: a quorum GET of the node itself, a
// built-in kind, from the same API server.
func (b *bench) readNode(ctx context.Context, i int) error {
	_, err := b.s.Kube.CoreV1().Nodes().Get(ctx, nodeName(i%b.o.nodes), metav1.GetOptions{})
	return err
}

// rechallenge asks the controller to attest the node now, as PreBind does
// for evidence refused only for its age, and wants a Passed verdict.
func (b *bench) rechallenge(ctx context.Context, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.challenge+nodeName(i%b.o.nodes), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var answer controller.ChallengeResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.Verdict != v1alpha1.AttestationPassed {
		return fmt.Errorf("challenge answered %d %s", resp.StatusCode, body)
	}
	return nil
}

// pass is what attesting, or writing, the states of every node cost.
type pass struct {
	took time.Duration
	// selfCPU is this process's CPU: the controller's, or the baseline
	// writer's; apiCPU kube-apiserver's and etcd's; attesterCPU the
	// attesters'.
	selfCPU, apiCPU, attesterCPU time.Duration
	// peakHeap is the most heap objects sampled during the pass, heap
	// the heap in use after a collection once it ended.
	peakHeap, heap uint64
}

// attestAll deletes the controller's states, as a fresh cluster starts
// without them, and waits until the controller has written every node's
// anew, Passed.
func (b *bench) attestAll(ctx context.Context) (pass, error) {
	w, err := b.watchPasses(ctx)
	if err != nil {
		return pass{}, err
	}
	defer w.Stop()
	return b.timePass(func() error {
		if err := b.s.Guard.DeleteAllOf(ctx, &v1alpha1.NodeSecurityState{}, client.MatchingLabels{guard.LabelTenantPool: pool}); err != nil {
			return err
		}
		_, err := b.waitPasses(w)
		return err
	})
}

// writeStates is the baseline of attestAll: the same delete, then as many
// states written by this process as the controller writes them (read from
// the API server, then created, eight at a time), with an attested state's
// spec and no attestation.
func (b *bench) writeStates(ctx context.Context) (pass, error) {
	labels := client.MatchingLabels{guard.LabelTenantPool: "baseline"}
	return b.timePass(func() error {
		if err := b.s.Guard.DeleteAllOf(ctx, &v1alpha1.NodeSecurityState{}, labels); err != nil {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for i := range b.o.nodes {
			g.Go(func() error {
				name := fmt.Sprintf("baseline-%04d", i)
				err := b.s.Guard.Get(gctx, client.ObjectKey{Name: name}, &v1alpha1.NodeSecurityState{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("state %s: want NotFound, got %v", name, err)
				}
				return b.s.Guard.Create(gctx, &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: b.floorSpec})
			})
		}
		return g.Wait()
	})
}

// timePass runs work and measures its time, CPU and heap.
func (b *bench) timePass(work func() error) (pass, error) {
	self, api, att := host.SelfCPU(), b.apiCPU(), host.ProcCPU(b.attesters.Process.Pid)
	peak := heapPeak()
	start := time.Now()
	err := work()
	p := pass{took: time.Since(start), peakHeap: peak(), selfCPU: host.SelfCPU() - self, apiCPU: b.apiCPU() - api,
		attesterCPU: host.ProcCPU(b.attesters.Process.Pid) - att}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.heap = m.HeapInuse
	return p, err
}

func (b *bench) apiCPU() time.Duration { return host.ProcCPU(b.apiserver) + host.ProcCPU(b.etcd) }

// heapPeak samples the heap's objects every 10 ms until the function it
// returns is called, which returns the most it saw.
func heapPeak() func() uint64 {
	stop, out := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-out }
}

// verifyBench verifies one lab SEV-SNP report in this process.
type verifyBench struct {
	v   *verify.Verifier
	req verify.Request
	// The baseline's inputs: the VCEK certificate, its issuer, and the
	// report's signed part and signature.
	vcek        []byte
	ask         *x509.Certificate
	signed, sig []byte
}

func newVerifyBench(labDir string) (*verifyBench, error) {
	chain, err := labtee.ReadSecretDir(labDir)
	if err != nil {
		return nil, err
	}
	v, err := verify.New(verify.Options{LabSNPRoot: chain.RootPEM()})
	if err != nil {
		return nil, err
	}
	n := nonce.For("node-uid", "incarnation", nonce.NewChallenge())
	ev, err := (&attester.Lab{Chain: chain, Measurement: allowed}).Evidence(context.Background(), n)
	if err != nil {
		return nil, err
	}
	report := ev.Data[:evidence.SNPReportSize]
	sig, err := abi.ReportToSignatureDER(report)
	if err != nil {
		return nil, err
	}
	vb := &verifyBench{v: v, vcek: chain.VCEK.Raw, ask: chain.ASK, signed: abi.SignedComponent(report), sig: sig,
		req: verify.Request{TEE: ev.TEE, Evidence: ev.Data, Nonce: n, Profile: guard.ProfileLab, References: verify.References{
			Measurements: []verify.Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: v1alpha1.Measurement("sha384:" + hex.EncodeToString(allowed[:]))}}}}}
	return vb, errors.Join(vb.verify(context.Background(), 0), vb.signatures(context.Background(), 0))
}

// verify is one Verify of the report, which must pass.
func (vb *verifyBench) verify(context.Context, int) error {
	req := vb.req
	req.ChallengedAt = time.Now()
	res, err := vb.v.Verify(req)
	if err == nil && res.Root != verify.RootLab {
		err = fmt.Errorf("verified against root %s, want %s", res.Root, verify.RootLab)
	}
	return err
}

// signatures is the baseline of verify, what any verifier of the report
// must do once it trusts the ASK: parse the VCEK certificate, check its
// signature by the ASK (RSASSA-PSS, 4096 bits) and the report's by the VCEK
// (ECDSA P-384).
func (vb *verifyBench) signatures(context.Context, int) error {
	vcek, err := x509.ParseCertificate(vb.vcek)
	if err != nil {
		return err
	}
	if err := vcek.CheckSignatureFrom(vb.ask); err != nil {
		return err
	}
	digest := sha512.Sum384(vb.signed)
	if pub, ok := vcek.PublicKey.(*ecdsa.PublicKey); !ok || !ecdsa.VerifyASN1(pub, digest[:], vb.sig) {
		return errors.New("the report's signature does not verify")
	}
	return nil
}
