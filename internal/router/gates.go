package router

import "github.com/sluice-dev/sluice/internal/reqbody"

// Bounds of request bodies.
const (
	// DefaultMaxBodyBytes is the default --max-body-bytes: 16 MiB holds a
	// long-context prompt of a few hundred thousand tokens with room to
	// spare.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxBufferedBodyBytes is the default
	// --max-buffered-body-bytes: the request body bytes the router holds at
	// once, all requests together. Of 64 MiB, buffers above 64 KiB may take
	// 48 MiB (two bodies of the largest default size and more smaller
	// ones); the rest holds thousands of ordinary prompts. It keeps the
	// router well inside a 256 MiB memory limit.
	DefaultMaxBufferedBodyBytes = 64 << 20
)

// heldBodies are the body buffers of one request: the body as read and its
// copy rewritten for the tier's served model. The serving goroutine
// releases them when the member's response headers arrive (the request was
// delivered whole and is never sent again) or when the request ends,
// whichever comes first; release is idempotent.
type heldBodies [2]*reqbody.Buffer

// release gives every buffer back once.
func (h *heldBodies) release() {
	for i, bb := range h {
		if bb != nil {
			bb.Release()
			h[i] = nil
		}
	}
}

// rewrite returns the body to send to a member serving quoted, a JSON
// string (nil: the alias): the body as read (h[0]), or its copy naming
// quoted in h[1], charged to budget whatever it holds, since the request
// is admitted. ref is where the body as read names its model.
func (h *heldBodies) rewrite(budget *reqbody.Budget, ref reqbody.ModelRef, quoted []byte) []byte {
	body := h[0].Bytes()
	n := reqbody.RewriteSize(quoted, body, ref)
	if n == 0 {
		return body
	}
	if h[1] == nil {
		h[1], _ = reqbody.NewBuffer(budget, n, true)
	} else {
		_ = h[1].Grow(n, n, true)
	}
	return h[1].Rewrite(body, ref, quoted)
}
