package router

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
)

// maxRequestIDLength bounds a caller's X-Request-Id the router keeps: ids
// appear in logs, headers and decision records, so they stay short.
const maxRequestIDLength = 64

// headerRequestID is the canonical request id header.
const headerRequestID = "X-Request-Id"

// idGenerator makes request ids unique within the process and unlikely to
// repeat across restarts: a random prefix drawn at start and a counter.
type idGenerator struct {
	prefix string
	n      atomic.Uint64
}

// newIDGenerator draws the random prefix.
func newIDGenerator() *idGenerator {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return &idGenerator{prefix: hex.EncodeToString(b[:]) + "-"}
}

// next returns a new id.
func (g *idGenerator) next() string {
	var buf [40]byte
	b := append(buf[:0], g.prefix...)
	b = strconv.AppendUint(b, g.n.Add(1), 36)
	return string(b)
}

// requestID returns the caller's X-Request-Id when it is a safe short token,
// and a new id otherwise.
func (g *idGenerator) requestID(h http.Header) string {
	if v := h[headerRequestID]; len(v) == 1 && safeRequestID(v[0]) {
		return v[0]
	}
	return g.next()
}

// safeRequestID reports whether id is 1..maxRequestIDLength bytes of
// [A-Za-z0-9._:-].
func safeRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
