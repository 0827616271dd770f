package pressure

import (
	"errors"

	"github.com/sluice-dev/sluice/internal/memberhttp"
)

// Errors returned by this package. Collection errors are classified by the
// Cache: ErrTransport, ErrTimeout and ErrHTTPStatus make a sample failed;
// ErrBodyTooLarge, ErrParse and ErrMissingSeries make it unknown.
var (
	// ErrUnknownEngine reports an engine name no adapter understands.
	ErrUnknownEngine = errors.New("pressure: unknown engine")
	// ErrParse reports an exposition that is not valid Prometheus text format.
	ErrParse = errors.New("pressure: metrics exposition does not parse")
	// ErrMissingSeries reports an exposition without any of the engine's
	// pressure series.
	ErrMissingSeries = errors.New("pressure: no pressure series in the exposition")
	// ErrBodyTooLarge reports a metrics body larger than MaxBodyBytes.
	ErrBodyTooLarge = memberhttp.ErrBodyTooLarge
	// ErrTransport reports a metrics request that failed before a complete
	// body arrived.
	ErrTransport = memberhttp.ErrTransport
	// ErrTimeout reports a metrics request that did not finish within
	// FetchTimeout.
	ErrTimeout = memberhttp.ErrTimeout
	// ErrHTTPStatus reports a metrics response whose status is not 2xx.
	ErrHTTPStatus = memberhttp.ErrHTTPStatus
	// ErrInvalidMetricsURL reports a metrics URL that is not an absolute
	// http or https URL with a host.
	ErrInvalidMetricsURL = errors.New("pressure: invalid metrics URL")

	// ErrInvalidTier reports a tier with an empty key.
	ErrInvalidTier = errors.New("pressure: invalid tier key")
	// ErrDuplicateTier reports two tiers with the same key.
	ErrDuplicateTier = errors.New("pressure: duplicate tier key")
	// ErrTierSize reports a tier with fewer than MinTierMembers or more than
	// MaxTierMembers members.
	ErrTierSize = errors.New("pressure: tier member count out of range")
	// ErrTooManyMembers reports a configuration with more than MaxMembers
	// members in total.
	ErrTooManyMembers = errors.New("pressure: too many members")
	// ErrInvalidMember reports a member with an empty id.
	ErrInvalidMember = errors.New("pressure: invalid member id")
	// ErrDuplicateMember reports two members of one tier with the same id.
	ErrDuplicateMember = errors.New("pressure: duplicate member id")
	// ErrInvalidCapacity reports a member ceiling outside 1..MaxCapacity.
	ErrInvalidCapacity = errors.New("pressure: member capacity out of range")
	// ErrUnknownTier reports a read of a tier that is not registered.
	ErrUnknownTier = errors.New("pressure: unknown tier")
	// ErrClosed reports a reconfiguration of a closed Cache.
	ErrClosed = errors.New("pressure: cache closed")
)
