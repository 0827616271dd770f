package reqbody

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Bounds of request body buffers.
const (
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

// Budget bounds the bytes of request body buffers held at once, all
// requests together (--max-buffered-body-bytes): every buffer's capacity is reserved
// before it is allocated and given back when the buffer is released.
// Buffers above bodyChunk may take only three quarters of the budget (large):
// the last quarter is kept for ordinary bodies, so that large slow bodies
// cannot refuse every request. A nil *Budget holds anything.
type Budget struct {
	limit int64
	large int64 // the most that buffers above bodyChunk may hold.
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, large: limit - limit/4}
}

// Limit returns the budget's limit in bytes; 0 for a nil budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// reserve takes n bytes from the budget for a buffer of capacity c and
// reports whether it could; with force it always takes them, even beyond
// the limit.
func (b *Budget) reserve(n int64, c int, force bool) bool {
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
func (b *Budget) release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Buffer is a request body buffer whose capacity is charged to a budget.
// Take one with NewBuffer or Read and give it back exactly once with
// Release.
type Buffer struct {
	b       []byte
	charged int64 // bytes reserved from budget: cap(b) once charged.
	budget  *Budget
}

// Bytes returns the buffer's bytes; they are the buffer's until Release.
func (bb *Buffer) Bytes() []byte { return bb.b }

// bufferPool recycles request body buffers across requests.
var bufferPool = sync.Pool{New: func() any {
	return &Buffer{b: make([]byte, 0, initialBodyBuffer)}
}}

// NewBuffer returns an empty buffer charged to budget, from the pool when
// the budget holds the pooled buffer's capacity, else a new one of
// initialBodyBuffer bytes. It returns ErrBudget when the budget cannot
// hold even that, or cannot hold n bytes when force is false; with force
// the capacity for n bytes is charged whatever the budget holds.
func NewBuffer(budget *Budget, n int, force bool) (*Buffer, error) {
	bb, _ := bufferPool.Get().(*Buffer)
	bb.b = bb.b[:0]
	if !budget.reserve(int64(cap(bb.b)), cap(bb.b), force) {
		bufferPool.Put(bb)
		bb = &Buffer{}
		if !budget.reserve(initialBodyBuffer, initialBodyBuffer, false) {
			return nil, ErrBudget
		}
		bb.b = make([]byte, 0, initialBodyBuffer)
	}
	bb.charged, bb.budget = int64(cap(bb.b)), budget
	if err := bb.Grow(n, n, force); err != nil {
		bb.Release()
		return nil, err
	}
	return bb, nil
}

// Grow makes room for n bytes in all, reserving the new capacity from the
// budget (unless force) before allocating it: the capacity at least
// doubles, up to most. On ErrBudget the buffer is unchanged.
func (bb *Buffer) Grow(n, most int, force bool) error {
	if n <= cap(bb.b) {
		return nil
	}
	c := max(n, min(2*cap(bb.b), most))
	if !bb.budget.reserve(int64(c)-bb.charged, c, force) {
		return ErrBudget
	}
	bb.charged = int64(c)
	b := make([]byte, len(bb.b), c)
	copy(b, bb.b)
	bb.b = b
	return nil
}

// Release gives the buffer's charge back to its budget and the buffer to
// the pool unless it grew above maxPooledBody. The buffer must not be used
// afterwards.
func (bb *Buffer) Release() {
	bb.budget.release(bb.charged)
	bb.charged, bb.budget = 0, nil
	if cap(bb.b) > maxPooledBody {
		return
	}
	bb.b = bb.b[:0]
	bufferPool.Put(bb)
}

// Read reads the whole body of r, at most limit bytes, into a
// buffer charged to budget. It returns ErrTooLarge when the announced
// or actual length is above limit and ErrBudget when the budget cannot
// hold the buffer (the rest of the body is left unread); any other error
// means the body could not be read. The caller owns the buffer and must
// give it back with Release.
func Read(r *http.Request, limit int64, budget *Budget) (*Buffer, error) {
	if r.ContentLength > limit {
		return nil, ErrTooLarge
	}
	bb, err := NewBuffer(budget, 0, false)
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
		err = bb.Grow(int(min(r.ContentLength+1, bodyChunk)), most, false)
	}
	for err == nil {
		if len(bb.b) == cap(bb.b) {
			if err = bb.Grow(len(bb.b)+1, most, false); err != nil {
				break
			}
		}
		var n int
		n, err = r.Body.Read(bb.b[len(bb.b):cap(bb.b)])
		bb.b = bb.b[:len(bb.b)+n]
		if int64(len(bb.b)) > limit {
			err = ErrTooLarge
		} else if err == io.EOF {
			return bb, nil
		}
	}
	bb.Release()
	return nil, err
}

// Rewrite replaces the buffer's bytes with body, every top-level "model"
// member of it written as quoted (RewriteModel), and returns them. ref is
// FindModel's result for body; grow the buffer to RewriteSize first, so
// that it does not allocate. body must not be the buffer's own bytes.
func (bb *Buffer) Rewrite(body []byte, ref ModelRef, quoted []byte) []byte {
	bb.b = RewriteModel(bb.b[:0], body, ref, quoted)
	return bb.b
}
