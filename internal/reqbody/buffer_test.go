package reqbody

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// defaultMaxBodyBytes is the router's default --max-body-bytes.
const defaultMaxBodyBytes = 16 << 20

func TestReadBody(t *testing.T) {
	for _, tt := range []struct {
		desc    string
		body    string
		hideLen bool
		wantErr error
	}{
		{desc: "at the limit", body: strings.Repeat("x", 8)},
		{desc: "above the limit, announced", body: strings.Repeat("x", 9), wantErr: ErrTooLarge},
		{desc: "above the limit, chunked", body: strings.Repeat("x", 9), hideLen: true, wantErr: ErrTooLarge},
		{desc: "chunked within", body: "abc", hideLen: true},
		{desc: "large chunked within a large limit", body: strings.Repeat("y", 3*initialBodyBuffer), hideLen: true},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.body)
			if tt.hideLen {
				r = io.MultiReader(r)
			}
			req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", r)
			if tt.hideLen {
				req.ContentLength = -1
			}
			limit := int64(8)
			if len(tt.body) > 8 && tt.wantErr == nil {
				limit = int64(len(tt.body))
			}
			buf, err := Read(req, limit, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(buf.b, []byte(tt.body)) {
				t.Fatalf("read %q", buf.b)
			}
		})
	}
}

// oneByteBody is a request body that announces much and sends one byte.
type oneByteBody struct{ sent bool }

func (b *oneByteBody) Read(p []byte) (int, error) {
	if b.sent || len(p) == 0 {
		return 0, io.EOF
	}
	b.sent = true
	p[0] = '{'
	return 1, io.EOF
}

// TestBodyBufferFollowsArrivedBytes proves a request body's buffer is not
// sized from the announced Content-Length beyond bodyChunk: reading a body
// that announces 16 MiB and sends one byte allocates at most bodyChunk
// bytes (heap bytes allocated, the least of five runs), and a body that
// does send its announced bytes is still read whole.
func TestBodyBufferFollowsArrivedBytes(t *testing.T) {
	least := uint64(math.MaxUint64)
	for range 5 {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", nil)
		req.Body, req.ContentLength = io.NopCloser(&oneByteBody{}), defaultMaxBodyBytes
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		buf, err := Read(req, defaultMaxBodyBytes, nil)
		runtime.ReadMemStats(&after)
		if err != nil || string(buf.b) != "{" {
			t.Fatalf("read %v, %v", buf, err)
		}
		buf.Release()
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > bodyChunk {
		t.Fatalf("reading one byte of an announced %d allocated %d bytes, want at most %d", defaultMaxBodyBytes, least, bodyChunk)
	}
	big := bytes.Repeat([]byte("x"), 3*bodyChunk+5)
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", bytes.NewReader(big))
	buf, err := Read(req, defaultMaxBodyBytes, nil)
	if err != nil || !bytes.Equal(buf.b, big) {
		t.Fatalf("read %v, %v; want the whole %d bytes", buf != nil, err, len(big))
	}
	buf.Release()
}

// TestBodyPoolBound proves the pool never keeps a buffer above
// maxPooledBody: a buffer just above it, handed back, is never handed out
// again.
func TestBodyPoolBound(t *testing.T) {
	for range 100 {
		over := &Buffer{b: make([]byte, 0, maxPooledBody+1)}
		over.Release()
		bb, err := NewBuffer(nil, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if cap(bb.b) > maxPooledBody {
			t.Fatalf("the pool handed out a buffer of %d bytes, above %d", cap(bb.b), maxPooledBody)
		}
		bb.Release()
	}
}

// TestBodyBudgetShares proves the split of the budget: buffers above
// bodyChunk may hold three quarters of it, smaller ones all of it, so that
// large bodies never take the last quarter from ordinary ones.
func TestBodyBudgetShares(t *testing.T) {
	b := NewBudget(1000)
	const large, small = bodyChunk + 1, bodyChunk
	for _, step := range []struct {
		n, c int
		want bool
	}{
		{700, large, true},
		{51, large, false}, // 751 > 750
		{50, large, true},  // 750
		{200, small, true}, // 950
		{1, large, false},
		{51, small, false}, // 1001 > 1000
		{50, small, true},  // 1000
	} {
		if got := b.reserve(int64(step.n), step.c, false); got != step.want {
			t.Fatalf("reserve %d for capacity %d with %d used: %v, want %v", step.n, step.c, b.InUse(), got, step.want)
		}
	}
	if !b.reserve(10, large, true) || b.InUse() != 1010 {
		t.Fatalf("a forced reservation: %d used, want 1010", b.InUse())
	}
	b.release(1010)
	if b.InUse() != 0 {
		t.Fatalf("%d used after releasing everything", b.InUse())
	}
}
