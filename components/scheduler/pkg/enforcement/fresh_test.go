package enforcement

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// gatedGuard counts reads and holds each one until released.
type gatedGuard struct {
	reads   atomic.Int32
	release chan struct{}
	version atomic.Int32 // the ResourceVersion the next read returns
	fail    atomic.Bool
}

func newGatedGuard() *gatedGuard { return &gatedGuard{release: make(chan struct{})} }

func (g *gatedGuard) read(ctx context.Context) (string, error) {
	g.reads.Add(1)
	v := g.version.Load()
	select {
	case <-g.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if g.fail.Load() {
		return "", errors.New("the API server is unavailable")
	}
	return string(rune('0' + v)), nil
}

func (g *gatedGuard) NodeSecurityState(ctx context.Context, name string) (*v1alpha1.NodeSecurityState, error) {
	rv, err := g.read(ctx)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}, nil
}

func (g *gatedGuard) PlacementPolicy(ctx context.Context, name string) (*v1alpha1.PlacementPolicy, error) {
	rv, err := g.read(ctx)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}, nil
}

// steppingClock returns a later instant at every call.
func steppingClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func TestSharedReadsJoinOnlyReadsSentAfterTheCaller(t *testing.T) {
	g := newGatedGuard()
	now := steppingClock()
	s := newSharedReads(g, now)
	ctx := context.Background()

	early := now()
	first := readAsync(t, s, early)
	waitReads(t, g, 1)
	// A caller that arrived before the read in flight was sent joins it.
	joined := readAsync(t, s, early)
	// A caller that arrived after it was sent must not: it sends its own.
	late := now()
	g.version.Store(1)
	own := readAsync(t, s, late)
	waitReads(t, g, 2)
	close(g.release)
	// The joining caller may have found either read: both were sent after
	// it arrived.
	if a, b, c := <-first, <-joined, <-own; a != "0" || (b != "0" && b != "1") || c != "1" {
		t.Fatalf("versions read: first %s, joined %s, late %s; want 0, 0 or 1, 1", a, b, c)
	}
	if n := g.reads.Load(); n != 2 {
		t.Fatalf("%d reads for three callers, want 2", n)
	}

	// An answered read is reused by a caller that arrived before it was
	// sent, never by one that arrived after.
	if _, err := s.NodeSecurityState(ctx, "n1", early); err != nil || g.reads.Load() != 2 {
		t.Fatalf("caller older than the answered read: err %v, %d reads; want it reused", err, g.reads.Load())
	}
	if _, err := s.NodeSecurityState(ctx, "n1", now()); err != nil || g.reads.Load() != 3 {
		t.Fatalf("caller newer than every read: err %v, %d reads; want a read of its own", err, g.reads.Load())
	}
	// Another object, or the other kind with the same name, is read apart.
	if _, err := s.PlacementPolicy(ctx, "n1", early); err != nil || g.reads.Load() != 4 {
		t.Fatalf("policy of the same name: err %v, %d reads; want a read of its own", err, g.reads.Load())
	}
}

func TestSharedReadsFailureIsNotReused(t *testing.T) {
	g := newGatedGuard()
	close(g.release)
	g.fail.Store(true)
	now := steppingClock()
	s := newSharedReads(g, now)
	since := now()
	if _, err := s.PlacementPolicy(context.Background(), "p", since); err == nil {
		t.Fatal("a failed read returned no error")
	}
	g.fail.Store(false)
	p, err := s.PlacementPolicy(context.Background(), "p", since)
	if err != nil || p == nil {
		t.Fatalf("after the API server recovered: %v, %v", p, err)
	}
	if n := g.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2: the failure must not be handed to a later caller", n)
	}
}

func TestSharedReadsCallerCancelLeavesTheReadToOthers(t *testing.T) {
	g := newGatedGuard()
	now := steppingClock()
	s := newSharedReads(g, now)
	since := now()
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := s.NodeSecurityState(ctx, "n1", since)
		gaveUp <- err
	}()
	waitReads(t, g, 1)
	other := make(chan error)
	go func() {
		_, err := s.NodeSecurityState(context.Background(), "n1", since)
		other <- err
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v, want context.Canceled", err)
	}
	close(g.release)
	if err := <-other; err != nil {
		t.Fatalf("the caller that waited on: %v", err)
	}
	if n := g.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
}

func TestSharedReadsForgetsOldAnswers(t *testing.T) {
	g := newGatedGuard()
	close(g.release)
	now := steppingClock()
	s := newSharedReads(g, now)
	for i := range maxSharedReads + 10 {
		if _, err := s.NodeSecurityState(context.Background(), string(rune(0x100+i)), now()); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	n := len(s.reads)
	s.mu.Unlock()
	if n >= maxSharedReads {
		t.Fatalf("%d answered reads kept, want fewer than %d", n, maxSharedReads)
	}
}

// readAsync reads the state of node n1 in the background and sends the
// version it got, "" on an error.
func readAsync(t *testing.T, s *sharedReads, since time.Time) <-chan string {
	out := make(chan string, 1)
	go func() {
		st, err := s.NodeSecurityState(context.Background(), "n1", since)
		if err != nil {
			t.Errorf("read since %s: %v", since, err)
			out <- ""
			return
		}
		out <- st.ResourceVersion
	}()
	return out
}

func waitReads(t *testing.T, g *gatedGuard, n int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.reads.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads sent, want %d", g.reads.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
