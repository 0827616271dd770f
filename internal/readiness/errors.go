package readiness

import (
	"errors"

	"github.com/sluice-dev/sluice/internal/memberhttp"
	"github.com/sluice-dev/sluice/internal/memberpoll"
)

// Errors returned by this package. Every probe error makes a member not
// ready; none is retained. Besides these, HTTPProber returns memberhttp's
// ErrTransport, ErrTimeout, ErrHTTPStatus and ErrBodyTooLarge, and the Cache
// memberpoll's registration and lookup errors.
var (
	// ErrMalformedResponse reports a models body that is not an OpenAI model
	// list ({"object":"list","data":[{"id":...}]}).
	ErrMalformedResponse = errors.New("readiness: models body is not a model list")
	// ErrModelNotServed reports a model list without the served model id.
	ErrModelNotServed = errors.New("readiness: served model not listed")
	// ErrInvalidEndpoint reports a member endpoint that is not an absolute
	// http or https URL with a host and without userinfo, query or fragment.
	ErrInvalidEndpoint = memberhttp.ErrInvalidURL
	// ErrInvalidServedModel reports a tier with an empty served model id.
	ErrInvalidServedModel = errors.New("readiness: invalid served model")
	// ErrAlreadyRunning reports a second call of Run.
	ErrAlreadyRunning = errors.New("readiness: already running")
	// ErrNotRunning reports a ProbeNow before Run or after it returned.
	ErrNotRunning = memberpoll.ErrStopped
)
