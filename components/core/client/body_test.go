package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/internal/benchdata"
)

// TestRequestBodyHolds checks that a body is recycled only when the caller
// and every reader have let go, and that a closed reader reads nothing.
func TestRequestBodyHolds(t *testing.T) {
	b := newRequestBody()
	b.buf = append(b.buf, "payload"...)
	r1, r2 := b.reader(), b.reader()
	if got := b.refs.Load(); got != 3 {
		t.Fatalf("holds = %d, want 3", got)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = r1.Close() // a second Close lets go only once
	b.release()
	if got := b.refs.Load(); got != 1 {
		t.Fatalf("holds after the caller and one reader let go = %d, want 1", got)
	}
	data, err := io.ReadAll(r2)
	if err != nil || string(data) != "payload" {
		t.Fatalf("open reader read %q, %v", data, err)
	}
	if _, err := r1.Read(make([]byte, 8)); !errors.Is(err, errBodyClosed) {
		t.Fatalf("read after close: %v, want errBodyClosed", err)
	}
	_ = r2.Close()
	if got := b.refs.Load(); got != 0 {
		t.Fatalf("holds after all let go = %d, want 0", got)
	}
}

// TestEvaluateConcurrentRecycledBodies has several goroutines evaluate
// requests of their own, of different sizes, against the real server:
// a body recycled while the transport still read it would send another
// call's nodes, and the client would refuse the answer.
func TestEvaluateConcurrentRecycledBodies(t *testing.T) {
	c := realServerClient(t, evaluate.Options{Profile: guard.ProfileLab}, 30*time.Second)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				req := benchdata.Request(1+(g*37+i*11)%200, 1, time.Now())
				for n := range req.Nodes {
					req.Nodes[n].Name = fmt.Sprintf("g%d-c%d-n%d", g, i, n)
				}
				got, err := c.Evaluate(context.Background(), req)
				if err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
				for n, res := range got.Results {
					if res.Node != req.Nodes[n].Name {
						t.Errorf("goroutine %d call %d: result %d is for %q, want %q", g, i, n, res.Node, req.Nodes[n].Name)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
