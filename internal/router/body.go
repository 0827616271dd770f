package router

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Bounds of request bodies.
const (
	// DefaultMaxBodyBytes is the default --max-body-bytes: 16 MiB holds a
	// long-context prompt of a few hundred thousand tokens with room to
	// spare.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxBufferedBodyBytes is the default
	// --max-buffered-body-bytes: the request body bytes the router holds at
	// once, all requests together. Of 64 MiB, buffers above bodyChunk may
	// take 48 MiB (two bodies of the largest default size and more smaller
	// ones); the rest holds thousands of ordinary prompts. It keeps the
	// router well inside a 256 MiB memory limit.
	DefaultMaxBufferedBodyBytes = 64 << 20
	// maxPooledBody is the largest buffer returned to the pool; rarer,
	// larger bodies are left to the garbage collector so the pool never pins
	// many megabytes.
	maxPooledBody = 1 << 20
	// bodyChunk is the most a request body's buffer is given ahead of the
	// bytes that arrived: an announced Content-Length above it is trusted
	// only that far, and the buffer grows as the body's bytes are read, so a
	// client announcing 16 MiB and sending one byte holds 64 KiB.
	bodyChunk = 64 << 10
	// initialBodyBuffer is the capacity of a new pooled buffer when the
	// request does not announce its length: most chat requests fit.
	initialBodyBuffer = 4 << 10
)

// bodyBudget bounds the bytes of request body buffers the router holds at
// once (--max-buffered-body-bytes): every buffer's capacity is reserved
// before it is allocated and given back when the buffer is released.
// Buffers above bodyChunk may take only three quarters of the budget (large):
// the last quarter is kept for ordinary bodies, so that large slow bodies
// cannot refuse every request. A nil *bodyBudget holds anything.
type bodyBudget struct {
	limit int64
	large int64 // the most that buffers above bodyChunk may hold.
	used  atomic.Int64
}

// newBodyBudget returns a budget of limit bytes.
func newBodyBudget(limit int64) *bodyBudget {
	return &bodyBudget{limit: limit, large: limit - limit/4}
}

// reserve takes n bytes from the budget for a buffer of capacity c and
// reports whether it could; with force it always takes them, even beyond
// the limit.
func (b *bodyBudget) reserve(n int64, c int, force bool) bool {
	if b == nil {
		return true
	}
	if force {
		b.used.Add(n)
		return true
	}
	limit := b.limit
	if c > bodyChunk {
		limit = b.large
	}
	for {
		used := b.used.Load()
		if used+n > limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// release gives n reserved bytes back.
func (b *bodyBudget) release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// inUse returns the bytes reserved now.
func (b *bodyBudget) inUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// bodyBuf is a request body buffer whose capacity is charged to a budget.
// Take one with newBodyBuf and give it back exactly once with release.
type bodyBuf struct {
	b       []byte
	charged int64 // bytes reserved from budget: cap(b) once charged.
	budget  *bodyBudget
}

// bodyPool recycles request body buffers across requests.
var bodyPool = sync.Pool{New: func() any {
	return &bodyBuf{b: make([]byte, 0, initialBodyBuffer)}
}}

// newBodyBuf returns an empty buffer charged to budget, from the pool when
// the budget holds the pooled buffer's capacity, else a new one of
// initialBodyBuffer bytes. It returns errBodyBudget when the budget cannot
// hold even that, or cannot hold n bytes when force is false; with force
// the capacity for n bytes is charged whatever the budget holds.
func newBodyBuf(budget *bodyBudget, n int, force bool) (*bodyBuf, error) {
	bb, _ := bodyPool.Get().(*bodyBuf)
	bb.b = bb.b[:0]
	if !budget.reserve(int64(cap(bb.b)), cap(bb.b), force) {
		bodyPool.Put(bb)
		bb = &bodyBuf{}
		if !budget.reserve(initialBodyBuffer, initialBodyBuffer, false) {
			return nil, errBodyBudget
		}
		bb.b = make([]byte, 0, initialBodyBuffer)
	}
	bb.charged, bb.budget = int64(cap(bb.b)), budget
	if err := bb.grow(n, n, force); err != nil {
		bb.release()
		return nil, err
	}
	return bb, nil
}

// grow makes room for n bytes in all, reserving the new capacity from the
// budget (unless force) before allocating it: the capacity at least
// doubles, up to most. On errBodyBudget the buffer is unchanged.
func (bb *bodyBuf) grow(n, most int, force bool) error {
	if n <= cap(bb.b) {
		return nil
	}
	c := max(n, min(2*cap(bb.b), most))
	if !bb.budget.reserve(int64(c)-bb.charged, c, force) {
		return errBodyBudget
	}
	bb.charged = int64(c)
	b := make([]byte, len(bb.b), c)
	copy(b, bb.b)
	bb.b = b
	return nil
}

// release gives the buffer's charge back to its budget and the buffer to
// the pool unless it grew above maxPooledBody. The buffer must not be used
// afterwards.
func (bb *bodyBuf) release() {
	bb.budget.release(bb.charged)
	bb.charged, bb.budget = 0, nil
	if cap(bb.b) > maxPooledBody {
		return
	}
	bb.b = bb.b[:0]
	bodyPool.Put(bb)
}

// readBody reads the whole request body, at most limit bytes, into a
// buffer charged to budget. It returns errBodyTooLarge when the announced
// or actual length is above limit and errBodyBudget when the budget cannot
// hold the buffer (the rest of the body is left unread); any other error
// means the body could not be read. The caller owns the buffer and must
// give it back with release.
func readBody(r *http.Request, limit int64, budget *bodyBudget) (*bodyBuf, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	bb, err := newBodyBuf(budget, 0, false)
	if err != nil {
		return nil, err
	}
	if r.Body == nil { // a request built by hand; servers always set one.
		return bb, nil
	}
	most := int(limit) + 1 // the byte past the limit shows a body too large.
	if r.ContentLength > 0 {
		// +1 to see EOF without growing; never more than a chunk ahead of
		// the bytes that arrived.
		err = bb.grow(int(min(r.ContentLength+1, bodyChunk)), most, false)
	}
	for err == nil {
		if len(bb.b) == cap(bb.b) {
			if err = bb.grow(len(bb.b)+1, most, false); err != nil {
				break
			}
		}
		var n int
		n, err = r.Body.Read(bb.b[len(bb.b):cap(bb.b)])
		bb.b = bb.b[:len(bb.b)+n]
		if int64(len(bb.b)) > limit {
			err = errBodyTooLarge
		} else if err == io.EOF {
			return bb, nil
		}
	}
	bb.release()
	return nil, err
}

// heldBodies are the body buffers of one request: the body as read and its
// copy rewritten for the tier's served model. The serving goroutine
// releases them when the member's response headers arrive (the request was
// delivered whole and is never sent again) or when the request ends,
// whichever comes first; release is idempotent.
type heldBodies [2]*bodyBuf

// release gives every buffer back once.
func (h *heldBodies) release() {
	for i, bb := range h {
		if bb != nil {
			bb.release()
			h[i] = nil
		}
	}
}
