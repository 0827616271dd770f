package router

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apikeys"
)

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
