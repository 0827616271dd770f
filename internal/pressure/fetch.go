package pressure

import (
	"bytes"
	"cmp"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-dev/sluice/internal/memberhttp"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

const (
	// FetchTimeout bounds one metrics request, and is the elapsed time (by
	// the Cache's clock) after which a fetch is failed even if it returned
	// data: a sample that old no longer describes the engine
	// (docs/PRESSURE.md#fetching).
	FetchTimeout = time.Second

	// MaxBodyBytes bounds a metrics body. A busy vLLM exposition is tens of
	// KiB; 1 MiB leaves room for many label sets while keeping a misbehaving
	// endpoint from costing the router memory. The collector reads one byte
	// more to tell "exactly 1 MiB" from "larger".
	MaxBodyBytes = 1 << 20

	// DefaultMetricsPath is the metrics path used when a member declares
	// none.
	DefaultMetricsPath = "/metrics"
)

// Target is everything a Collector needs to sample one member.
type Target struct {
	// MetricsURL is the absolute http(s) URL of the member's metrics
	// endpoint.
	MetricsURL string
	// Engine selects the adapter that reads the exposition.
	Engine Engine
	// Series names the member's own series, each replacing the engine's
	// for its signal (see Series).
	Series Series
}

// Collector samples one member. Collect must return within a bounded time
// and honour ctx; the Cache cancels ctx when it is closed or the member is
// removed. Its error is classified by Classify, never retained: errors
// wrapping ErrParse, ErrBodyTooLarge, ErrMissingSeries, ErrUnknownEngine or
// ErrInvalidSeries make the sample unknown, every other error makes it failed.
type Collector interface {
	// Collect fetches and parses the member's metrics.
	Collect(ctx context.Context, target Target) (scheduler.Telemetry, error)
}

// HTTPCollector is the Collector that GETs the metrics URL over HTTP. It
// applies FetchTimeout to the whole exchange, reads at most MaxBodyBytes+1
// bytes, follows no redirects and parses the body with Parse.
type HTTPCollector struct {
	// Client sends the requests. Its zero value (nil) uses a client with
	// FetchTimeout, no proxy and no redirects; a caller-supplied client's
	// own timeout and redirect policy apply in addition to FetchTimeout.
	Client *http.Client
}

// defaultClient is shared by every HTTPCollector without a Client so that
// connections to a member are reused across refreshes.
var defaultClient = memberhttp.NewClient(FetchTimeout)

// Collect implements Collector. Its errors never contain the URL, the
// address or the body.
func (h HTTPCollector) Collect(ctx context.Context, target Target) (scheduler.Telemetry, error) {
	body, err := memberhttp.Get(ctx, cmp.Or(h.Client, defaultClient), target.MetricsURL, "text/plain;version=0.0.4", FetchTimeout, MaxBodyBytes)
	if err != nil {
		return scheduler.Telemetry{}, err
	}
	return Parse(target.Engine, target.Series, bytes.NewReader(body))
}

// MetricsURL joins a member endpoint and a metrics path into the absolute
// URL a Target needs. An empty path means DefaultMetricsPath; a non-empty
// path must start with "/". The endpoint must be an absolute http or https
// URL with a host and no user info, query or fragment. Errors wrap
// ErrInvalidMetricsURL.
func MetricsURL(endpoint, path string) (string, error) {
	return memberhttp.JoinURL(endpoint, cmp.Or(path, DefaultMetricsPath))
}

// validMetricsURL reports whether raw is an absolute http(s) URL with a host.
func validMetricsURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && memberhttp.ValidURL(u)
}
