package controller

import (
	"context"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// BenchmarkVerifyLabEvidence is the verifier's share of a challenge: one
// lab SEV-SNP report, chain, nonce and reference values.
func BenchmarkVerifyLabEvidence(b *testing.B) {
	g := newRig(b)
	challenge := nonce.NewChallenge()
	n := nonce.For("uid-1", "inc", challenge)
	ev, err := g.lab.Evidence(context.Background(), n)
	if err != nil {
		b.Fatal(err)
	}
	refs, _ := g.r.References.References()
	req := verify.Request{TEE: v1alpha1.TEESEVSNP, Evidence: ev.Data, Nonce: n, ChallengedAt: g.clock.Now(), Profile: guard.ProfileLab, References: refs}
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.r.Verifier.Verify(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChallenge is one whole challenge against a fake API server:
// the lab TEE signs, the verifier verifies, the state is written.
func BenchmarkChallenge(b *testing.B) {
	g := newRig(b)
	ctx := context.Background()
	for b.Loop() {
		g.clock.SetTime(g.clock.Now().Add(time.Second))
		if _, err := g.r.Challenge(ctx, "node-1"); err != nil {
			b.Fatal(err)
		}
	}
}
