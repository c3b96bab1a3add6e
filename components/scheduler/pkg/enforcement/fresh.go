package enforcement

import (
	"context"
	"sync"
	"time"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// freshReadTimeout bounds a shared read: it runs on behalf of every Bind
// that joins it, so no single caller's context may cancel it.
const freshReadTimeout = 30 * time.Second

// sharedReads lets Binds share their API reads without ever using one
// older than themselves: a Bind that started waiting at since may take
// the result of a read of the same object that was sent at or after since,
// whether that read is still in flight or already answered. The guarantee
// is the one of a read of its own: the facts were read from the API server
// after the pod reached Bind, so after it was judged. Under a burst, the
// Binds queued for a slot find most of their reads already made — the
// policy of a tenant is read once per slot turn, not once per pod.
type sharedReads struct {
	r   guardReader
	now func() time.Time

	mu    sync.Mutex
	reads map[readKey]*sharedRead
}

type readKey struct {
	kind string
	name string
}

type sharedRead struct {
	sent time.Time
	done chan struct{}
	obj  any // the object read, a typed nil when there is none
	err  error
}

// maxSharedReads bounds the answered reads kept for reuse; past it, the
// oldest half of the answered ones are forgotten.
const maxSharedReads = 4096

func newSharedReads(r guardReader, now func() time.Time) *sharedReads {
	return &sharedReads{r: r, now: now, reads: map[readKey]*sharedRead{}}
}

// NodeSecurityState returns the named state as read at or after since.
func (s *sharedReads) NodeSecurityState(ctx context.Context, name string, since time.Time) (*v1alpha1.NodeSecurityState, error) {
	return sharedGet(ctx, s, "NodeSecurityState", name, since, s.r.NodeSecurityState)
}

// PlacementPolicy returns the named policy as read at or after since.
func (s *sharedReads) PlacementPolicy(ctx context.Context, name string, since time.Time) (*v1alpha1.PlacementPolicy, error) {
	return sharedGet(ctx, s, "PlacementPolicy", name, since, s.r.PlacementPolicy)
}

func sharedGet[T any](ctx context.Context, s *sharedReads, kind, name string, since time.Time,
	read func(context.Context, string) (*T, error)) (*T, error) {
	rd, err := s.get(ctx, readKey{kind, name}, since, func(ctx context.Context) (any, error) { return read(ctx, name) })
	if err != nil {
		return nil, err
	}
	if rd.err != nil {
		return nil, rd.err
	}
	return rd.obj.(*T), nil
}

// get joins a read of key sent at or after since, or sends one. The error
// is the caller's own (its context ended); the read's error is in the read.
func (s *sharedReads) get(ctx context.Context, key readKey, since time.Time, read func(context.Context) (any, error)) (*sharedRead, error) {
	s.mu.Lock()
	rd := s.reads[key]
	if rd == nil || !rd.sent.After(since) {
		rd = &sharedRead{sent: s.now(), done: make(chan struct{})}
		s.forgetLocked()
		s.reads[key] = rd
		s.mu.Unlock()
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), freshReadTimeout)
			defer cancel()
			rd.obj, rd.err = read(rctx)
			if rd.err != nil {
				// A failure answers the Binds that joined it; later
				// ones try again.
				s.mu.Lock()
				if s.reads[key] == rd {
					delete(s.reads, key)
				}
				s.mu.Unlock()
			}
			close(rd.done)
		}()
	} else {
		s.mu.Unlock()
	}
	select {
	case <-rd.done:
		return rd, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// forgetLocked drops the older half of the answered reads once there are
// too many; reads in flight stay.
func (s *sharedReads) forgetLocked() {
	if len(s.reads) < maxSharedReads {
		return
	}
	var newest, oldest time.Time
	for _, rd := range s.reads {
		if oldest.IsZero() || rd.sent.Before(oldest) {
			oldest = rd.sent
		}
		if rd.sent.After(newest) {
			newest = rd.sent
		}
	}
	cut := oldest.Add(newest.Sub(oldest) / 2)
	for k, rd := range s.reads {
		select {
		case <-rd.done:
			if !rd.sent.After(cut) {
				delete(s.reads, k)
			}
		default:
		}
	}
}
