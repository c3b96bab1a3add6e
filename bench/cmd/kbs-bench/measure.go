package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/bench/internal/openloop"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/kbs"
)

// The measures, each followed by its baseline.
const (
	mRelease      = "key release"
	mReleaseFloor = "TokenReview + pod GET + NSS GET"
	mResource     = "resource in a session"
	mReadsFloor   = "pod GET + Node GET + NSS GET"
)

var (
	measures  = []string{mRelease, mReleaseFloor, mResource, mReadsFloor}
	baselines = map[string]string{mRelease: mReleaseFloor, mResource: mReadsFloor}
)

// pass is one measure's run in one round.
type pass struct {
	samples []openloop.Sample
	// firstErr is the first failure, for the log.
	firstErr error
	// selfCPU is this process's CPU time (broker and load generator),
	// apiCPU kube-apiserver's and etcd's, during the pass.
	selfCPU, apiCPU time.Duration
	took            time.Duration
}

// sender makes request i of a measure; prepare runs before the measure,
// outside it.
type sender struct {
	prepare func(ctx context.Context) error
	send    func(ctx context.Context, i int) error
}

func (b *bench) senders() map[string]*sender {
	var sessions []*kbs.Session
	return map[string]*sender{
		mRelease: {send: func(ctx context.Context, i int) error {
			p := i % len(b.pods)
			s, err := b.kc.Attest(ctx, b.podTokens[p], b.keys[p])
			if err != nil {
				return err
			}
			return b.check(s.Resource(ctx, resource))
		}},
		mReleaseFloor: {send: func(ctx context.Context, i int) error {
			p := i % len(b.pods)
			st, err := b.tokens.Review(ctx, b.podTokens[p])
			if err != nil {
				return err
			}
			if !st.Authenticated {
				return fmt.Errorf("the token of pod %s does not authenticate: %s", b.pods[p].Name, st.Error)
			}
			if err := b.live.Get(ctx, b.podKey(p), &corev1.Pod{}); err != nil {
				return err
			}
			return b.live.Get(ctx, client.ObjectKey{Name: nodeName}, &v1alpha1.NodeSecurityState{})
		}},
		mResource: {
			// Sessions live five minutes from auth: attest new ones, one
			// per pod, before every pass.
			prepare: func(ctx context.Context) error {
				sessions = sessions[:0]
				for p := range b.pods {
					s, err := b.kc.Attest(ctx, b.podTokens[p], b.keys[p])
					if err != nil {
						return fmt.Errorf("attesting the session of pod %s: %w", b.pods[p].Name, err)
					}
					sessions = append(sessions, s)
				}
				return nil
			},
			send: func(ctx context.Context, i int) error {
				return b.check(sessions[i%len(sessions)].Resource(ctx, resource))
			},
		},
		mReadsFloor: {send: func(ctx context.Context, i int) error {
			if err := b.live.Get(ctx, b.podKey(i%len(b.pods)), &corev1.Pod{}); err != nil {
				return err
			}
			if err := b.live.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{}); err != nil {
				return err
			}
			return b.live.Get(ctx, client.ObjectKey{Name: nodeName}, &v1alpha1.NodeSecurityState{})
		}},
	}
}

// check checks that a released key is the Secret's.
func (b *bench) check(key []byte, err error) error {
	if err != nil {
		return err
	}
	if !bytes.Equal(key, b.secret) {
		return fmt.Errorf("released %d bytes that are not the Secret's key", len(key))
	}
	return nil
}

// measure runs one measure open loop at the rate for the duration.
func (b *bench) measure(ctx context.Context, s *sender, d time.Duration) (pass, error) {
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return pass{}, err
		}
	}
	n := int(d.Seconds() * float64(b.o.rate))
	self, api := host.SelfCPU(), b.apiCPU()
	start := time.Now()
	samples := openloop.Run(ctx, b.o.rate, n, func(i int) error { return s.send(ctx, i) })
	p := pass{samples: samples, took: time.Since(start), selfCPU: host.SelfCPU() - self, apiCPU: b.apiCPU() - api}
	for _, sm := range samples {
		if sm.Err != nil {
			p.firstErr = sm.Err
			break
		}
	}
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, nil
}

func (b *bench) apiCPU() time.Duration { return host.ProcCPU(b.apiserver) + host.ProcCPU(b.etcd) }
