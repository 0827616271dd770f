package router

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// hopByHopHeaders are the request headers that describe the client's
// connection to the router, not the request: RFC 9110 §7.6.1 and the
// headers net/http's ReverseProxy drops (RFC 2616 §13.5.1, Proxy-Connection
// and Upgrade). Every header a Connection header names is dropped too,
// except TE, which a client sending it must name there (RFC 9110 §10.1.4):
// TE is left to ReverseProxy, which drops it and sends "TE: trailers" only
// when the client's TE named trailers.
var hopByHopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// dropHopByHop removes from h the headers of the client's connection
// (hopByHopHeaders and every header its Connection headers name), before
// the reverse proxy reads them. ReverseProxy would drop them too, but it
// keeps a protocol upgrade (Connection: Upgrade and Upgrade) for the
// backend and fails a request whose Upgrade value is not printable; the
// router serves a request asking for an upgrade as a plain request instead
// (RFC 9110 §7.8 lets a server ignore Upgrade), so no engine sees one.
func dropHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = http.CanonicalHeaderKey(textproto.TrimString(name)); name != "" && name != "Te" {
				delete(h, name)
			}
		}
	}
	for _, name := range hopByHopHeaders {
		delete(h, name)
	}
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
