package router

import (
	"io"
	"net/http"
	"sync"
)

// Bounds of request bodies.
const (
	// DefaultMaxBodyBytes is the default --max-body-bytes: 16 MiB holds a
	// long-context prompt of a few hundred thousand tokens with room to
	// spare.
	DefaultMaxBodyBytes = 16 << 20
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

// bodyPool recycles request body buffers across requests.
var bodyPool = sync.Pool{New: func() any {
	b := make([]byte, 0, initialBodyBuffer)
	return &b
}}

// readBody reads the whole request body, at most limit bytes, into a pooled
// buffer. It returns errBodyTooLarge when the announced or actual length is
// above limit; any other error means the body could not be read. The caller
// owns the buffer and must hand it back with recycleBody.
func readBody(r *http.Request, limit int64) (*[]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	bp := getBody()
	b := *bp
	if r.Body == nil { // a request built by hand; servers always set one.
		*bp = b
		return bp, nil
	}
	if r.ContentLength > 0 {
		// +1 to see EOF without growing; never more than a chunk ahead of
		// the bytes that arrived.
		if want := min(r.ContentLength+1, bodyChunk); int64(cap(b)) < want {
			b = make([]byte, 0, want)
		}
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			*bp = b
			recycleBody(bp)
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			*bp = b
			return bp, nil
		}
		if err != nil {
			*bp = b
			recycleBody(bp)
			return nil, err
		}
	}
}

// getBody returns an empty buffer from the pool; hand it back with
// recycleBody.
func getBody() *[]byte {
	bp, _ := bodyPool.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// recycleBody returns a buffer to the pool unless it grew too large.
func recycleBody(bp *[]byte) {
	if cap(*bp) > maxPooledBody {
		return
	}
	*bp = (*bp)[:0]
	bodyPool.Put(bp)
}
