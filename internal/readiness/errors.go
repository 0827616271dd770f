package readiness

import (
	"errors"

	"github.com/sluice-dev/sluice/internal/memberhttp"
)

// Errors returned by this package. Every probe error makes a member not
// ready; none is retained.
var (
	// ErrTransport reports a models request that failed before a complete
	// body arrived.
	ErrTransport = memberhttp.ErrTransport
	// ErrTimeout reports a models request that did not finish within
	// ProbeTimeout.
	ErrTimeout = memberhttp.ErrTimeout
	// ErrHTTPStatus reports a models response whose status is not 2xx.
	ErrHTTPStatus = memberhttp.ErrHTTPStatus
	// ErrBodyTooLarge reports a models body larger than MaxBodyBytes.
	ErrBodyTooLarge = memberhttp.ErrBodyTooLarge
	// ErrMalformedResponse reports a models body that is not an OpenAI model
	// list ({"object":"list","data":[{"id":...}]}).
	ErrMalformedResponse = errors.New("readiness: models body is not a model list")
	// ErrModelNotServed reports a model list without the served model id.
	ErrModelNotServed = errors.New("readiness: served model not listed")

	// ErrInvalidTier reports a tier with an empty key.
	ErrInvalidTier = errors.New("readiness: invalid tier key")
	// ErrDuplicateTier reports two tiers with the same key.
	ErrDuplicateTier = errors.New("readiness: duplicate tier key")
	// ErrInvalidServedModel reports a tier with an empty served model id.
	ErrInvalidServedModel = errors.New("readiness: invalid served model")
	// ErrTierSize reports a tier with no members or more than MaxTierMembers.
	ErrTierSize = errors.New("readiness: tier member count out of range")
	// ErrTooManyMembers reports more than MaxMembers members in total.
	ErrTooManyMembers = errors.New("readiness: too many members")
	// ErrInvalidMember reports a member id outside the ReplicaTier grammar.
	ErrInvalidMember = errors.New("readiness: invalid member id")
	// ErrDuplicateMember reports two members of one tier with the same id.
	ErrDuplicateMember = errors.New("readiness: duplicate member id")
	// ErrInvalidEndpoint reports a member endpoint that is not an absolute
	// http or https URL with a host and without userinfo, query or fragment.
	ErrInvalidEndpoint = errors.New("readiness: invalid member endpoint")

	// ErrUnknownTier reports a tier that is not registered.
	ErrUnknownTier = errors.New("readiness: unknown tier")
	// ErrUnknownMember reports a member that is not registered in the tier,
	// or was removed while ProbeNow waited.
	ErrUnknownMember = errors.New("readiness: unknown member")
	// ErrClosed reports a use of a closed Cache.
	ErrClosed = errors.New("readiness: cache closed")
	// ErrAlreadyRunning reports a second call of Run.
	ErrAlreadyRunning = errors.New("readiness: already running")
	// ErrNotRunning reports a ProbeNow before Run or after it returned.
	ErrNotRunning = errors.New("readiness: not running")
)
