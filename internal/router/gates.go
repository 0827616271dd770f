package router

// The gates of an inference request, before any reservation
// (docs/ROUTER.md#2-request-path): its request id, its tenant, its body
// held in budgeted buffers, and the router's own error answers, which the
// exchange gives too.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apierror"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/reqbody"
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

// GatewayFairnessHeader is the request header in which the Gateway API
// Inference Extension names a request's fairness group; behind it,
// --tenant-header takes this name
// (docs/CONFIGURATION.md#41-tenants-and-priorities).
const GatewayFairnessHeader = "x-gateway-inference-fairness-id"

// unusableTenantHeader reports whether the canonical header name cannot
// name a tenant: it carries credentials (a tenant name is logged and
// counted, a credential never is), it describes the client's connection
// (hopByHopHeaders, TE), or net/http moves it out of the request's header
// map (Host), so it would never be read.
func unusableTenantHeader(canonical string) bool {
	switch canonical {
	case "Authorization", "Proxy-Authorization", "Cookie", "Host", "Te":
		return true
	}
	return slices.Contains(hopByHopHeaders, canonical)
}

// ParseTenantHeader checks the name given to --tenant-header and returns
// its canonical form; an empty name (the tenant header off) returns "".
// The name must be a header name (RFC 9110 §5.1) of at most
// maxHeaderNameLength bytes that is neither a credential header, a header
// of the client's connection nor Host. An invalid name returns an error
// wrapping ErrTenantHeader that never quotes it.
func ParseTenantHeader(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	if len(name) > maxHeaderNameLength || !validHeaderName(name) {
		return "", fmt.Errorf("%w: not a header name of at most %d bytes", ErrTenantHeader, maxHeaderNameLength)
	}
	canonical := http.CanonicalHeaderKey(name)
	if unusableTenantHeader(canonical) {
		return "", fmt.Errorf("%w: %s carries credentials or describes the connection; name a header of its own, such as %s",
			ErrTenantHeader, canonical, GatewayFairnessHeader)
	}
	return canonical, nil
}

// tenantOf returns the tenant an authenticated request waits for, given
// the tenant of the key it presented. With Options.TenantHeader set, a
// request carrying exactly one value of that header, a valid tenant name
// (apikeys.ValidTenantName), belongs to the tenant of that name, at the
// key's priority: a header never changes a priority. Without the header, with
// more than one value or with a value that is not a tenant name, the
// request stays the key's tenant; nothing is counted or logged, since the
// value is the client's.
func (rt *Router) tenantOf(r *http.Request, fromKey admission.Tenant) admission.Tenant {
	if rt.tenantHeader == "" {
		return fromKey
	}
	values := r.Header[rt.tenantHeader]
	if len(values) != 1 || !apikeys.ValidTenantName(values[0]) {
		return fromKey
	}
	return admission.Tenant{Name: values[0], Priority: fromKey.Priority}
}

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

// The errors of the front door. Their codes are part of the documented API
// (docs/ROUTER.md).
var (
	errBadRequest = apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "invalid_request_body",
		`The request body must be a JSON object with a string "model" field.`)
	errUnauthorized = apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "invalid_api_key",
		"Missing or invalid API key.")
	errModelNotFound = apierror.New(http.StatusNotFound, apierror.TypeInvalidRequest, "model_not_found",
		"The model does not exist on this router.")
	errRouteNotFound = apierror.New(http.StatusNotFound, apierror.TypeInvalidRequest, "not_found",
		"Unknown route.")
	errMethodNotAllowed = apierror.New(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "method_not_allowed",
		"Method not allowed on this route.")
	errTooLarge = apierror.New(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest, "request_too_large",
		"The request body exceeds the router's size limit.")
	errBodyBufferExhausted = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "body_buffer_exhausted",
		"The router holds too many request bodies at the moment; retry later.")
	errCapacityExhausted = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "capacity_exhausted",
		"Every eligible replica of the model is at its concurrency limit; retry later.")
	errTierQuiesced = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "tier_quiesced",
		"The model is quiesced for maintenance; retry later.")
	errNoEligibleMember = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "no_eligible_member",
		"No replica of the model is ready and admitting; retry later.")
	errQueueFull = apierror.New(http.StatusTooManyRequests, apierror.TypeServer, "queue_full",
		"Every replica of the model is busy and its admission queue is full; retry later.")
	errQueueTimeout = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "queue_timeout",
		"No replica of the model became free within the longest queue wait; retry later.")
	errQueueHandedOver = apierror.New(http.StatusServiceUnavailable, apierror.TypeServer, "router_handed_over",
		"The router handed the model over to its successor while the request waited; retry now.")
	errUpstreamUnavailable = apierror.New(http.StatusBadGateway, apierror.TypeServer, "upstream_unavailable",
		"The model server failed before sending a response.")
	errUpstreamTimeout = apierror.New(http.StatusGatewayTimeout, apierror.TypeServer, "upstream_timeout",
		"The model server did not send a response in time.")
)
