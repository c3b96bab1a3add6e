package client

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// requestBody is an encoded request and the buffer it lives in. The
// transport may still read a body after Do has returned, and closes every
// body it was given once it is done with it; the buffer goes back to
// requestBodies only when the caller and every reader handed to the
// transport have let go, so that a large request's buffer is reused
// instead of being allocated for every call.
type requestBody struct {
	buf  []byte
	refs atomic.Int32
}

var requestBodies = sync.Pool{New: func() any { return new(requestBody) }}

// newRequestBody returns an empty body held once, by the caller.
func newRequestBody() *requestBody {
	b := requestBodies.Get().(*requestBody)
	b.buf = b.buf[:0]
	b.refs.Store(1)
	return b
}

// reader returns a reader of the body for the transport, which holds the
// body until it closes the reader.
func (b *requestBody) reader() io.ReadCloser {
	b.refs.Add(1)
	r := &bodyReader{body: b}
	r.r.Reset(b.buf)
	return r
}

// release lets go of one hold on the body.
func (b *requestBody) release() {
	if b.refs.Add(-1) == 0 {
		requestBodies.Put(b)
	}
}

// bodyReader reads a requestBody until it is closed. The transport may
// close a body from another goroutine than the one reading it, so reads
// and Close exclude each other: once Close has returned, no read touches
// the buffer, which may then be serving another request.
type bodyReader struct {
	mu     sync.Mutex
	r      bytes.Reader
	body   *requestBody
	closed bool
}

var errBodyClosed = errors.New("request body read after close")

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errBodyClosed
	}
	return r.r.Read(p)
}

// Close lets go of the body, once however often it is called.
func (r *bodyReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.r.Reset(nil)
		r.body.release()
	}
	return nil
}
