package router

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/upstream"
)

// hopByHopHeaders are the header fields that describe one connection, not
// the message: RFC 9110 §7.6.1 (Connection, Proxy-Connection, Keep-Alive,
// TE, Transfer-Encoding, Upgrade), the Proxy-Authenticate and
// Proxy-Authorization of RFC 2616 §13.5.1, and Trailer, which announces a
// message's trailers to the next hop. net/http's ReverseProxy drops the
// same list. Every field a Connection field names is dropped too.
var hopByHopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// dropHopByHop removes from a client's request header h the fields of the
// client's connection: hopByHopHeaders and every field its Connection
// fields name, except TE, which the exchange reads afterwards (a client
// sending TE must name it in Connection, RFC 9110 §10.1.4) and which the
// member client never sends as it is (the exchange sends "TE: trailers"
// when the client's named trailers). An upgrade is dropped with the rest:
// the router serves a request asking for one as a plain request (RFC 9110
// §7.8 lets a server ignore Upgrade), so no engine sees one.
func dropHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = http.CanonicalHeaderKey(textproto.TrimString(name)); name != "" && name != "Te" {
				delete(h, name)
			}
		}
	}
	for _, name := range hopByHopHeaders {
		if name != "Te" {
			delete(h, name)
		}
	}
}

// dropResponseHopByHop removes from a member's response header h the
// fields of the member's connection: hopByHopHeaders and every field its
// Connection fields name. The member's trailers are announced anew from
// the response's own (copyResponseHeader).
func dropResponseHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHopHeaders {
		delete(h, name)
	}
}

// forwardingFields remove the client's forwarding fields from every
// upstream request: the router adds none, and a client's would claim a
// path the router cannot vouch for.
var forwardingFields = []upstream.Field{
	{Name: "Forwarded"}, {Name: "X-Forwarded-For"}, {Name: "X-Forwarded-Host"}, {Name: "X-Forwarded-Proto"},
}

// teTrailers tells a member that the client takes trailers (RFC 9110
// §10.1.4), sent only when the client's TE said so.
var teTrailers = upstream.Field{Name: "Te", Values: []string{"trailers"}}

// containsToken reports whether the comma-separated field values name
// token, ASCII case-insensitively.
func containsToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}

// copyResponseHeader adds the member's response fields src (hop-by-hop
// ones dropped already) to the client's header h, less the router's own
// (X-Request-Id, X-Sluice-Tier, X-Sluice-Member: h has them already) and
// the engine fields the router strips (Router.stripHeaders).
func (rt *Router) copyResponseHeader(h, src http.Header) {
	delete(src, headerRequestID)
	delete(src, headerTier)
	delete(src, headerMember)
	for _, name := range rt.stripHeaders {
		delete(src, name)
	}
	for k, vv := range src {
		if have, ok := h[k]; ok {
			h[k] = append(have[:len(have):len(have)], vv...)
		} else {
			h[k] = vv // the member's header is the exchange's alone.
		}
	}
}

// announceTrailers announces in h's Trailer field the trailers the
// member's head announced, which the exchange passes on after the body.
func announceTrailers(h http.Header, a *upstream.Attempt) {
	trailer := a.Trailer()
	if len(trailer) == 0 {
		return
	}
	names := make([]string, 0, len(trailer))
	for k := range trailer {
		names = append(names, k)
	}
	h.Add("Trailer", strings.Join(names, ", "))
}

// strippedEngineHeaders are the engine response headers the router removes
// by default, each in its canonical form: they name the engine's software
// (Server, X-Powered-By, Via), set state on the client under the router's
// name (Set-Cookie, Set-Cookie2), or send the client to another endpoint
// for the router's origin (Alt-Svc). --pass-engine-headers lets named ones
// through.
var strippedEngineHeaders = []string{"Server", "X-Powered-By", "Via", "Set-Cookie", "Set-Cookie2", "Alt-Svc"}

// StrippedEngineHeaders returns the engine response headers the router
// removes unless Options.PassEngineHeaders names them.
func StrippedEngineHeaders() []string { return slices.Clone(strippedEngineHeaders) }

// maxHeaderNameLength bounds one name of --pass-engine-headers: the longest
// stripped header (Set-Cookie2, X-Powered-By) is 12 bytes, so a longer name
// cannot be one of them; the bound keeps the error message short.
const maxHeaderNameLength = 64

// ParsePassEngineHeaders parses a comma-separated list of engine response
// headers to let through (--pass-engine-headers) and returns their
// canonical forms. Every name must be a valid header name that the router
// strips by default (StrippedEngineHeaders); an empty list lets none
// through. An invalid list returns an error wrapping ErrPassEngineHeader.
func ParsePassEngineHeaders(list string) ([]string, error) {
	var names []string
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return nil, fmt.Errorf("%w: an empty name in the list", ErrPassEngineHeader)
		case len(name) > maxHeaderNameLength || !validHeaderName(name):
			return nil, fmt.Errorf("%w: not a header name (%d bytes)", ErrPassEngineHeader, len(name))
		}
		canonical := http.CanonicalHeaderKey(name)
		if !slices.Contains(strippedEngineHeaders, canonical) {
			return nil, fmt.Errorf("%w: %s is not stripped, it passes already (stripped: %s)",
				ErrPassEngineHeader, canonical, strings.Join(strippedEngineHeaders, ", "))
		}
		if !slices.Contains(names, canonical) {
			names = append(names, canonical)
		}
	}
	return names, nil
}

// engineHeadersToStrip returns the stripped engine headers pass does not
// name.
func engineHeadersToStrip(pass []string) []string {
	var strip []string
	for _, name := range strippedEngineHeaders {
		if !slices.Contains(pass, name) {
			strip = append(strip, name)
		}
	}
	return strip
}

// validHeaderName reports whether s is a field name: one or more tchar
// (RFC 9110 §5.1, §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
