package pressure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

const (
	// FetchTimeout bounds one metrics request, and is the elapsed time (by
	// the Cache's clock) after which a fetch is failed even if it returned
	// data: a sample that old no longer describes the engine, and SPEC §8
	// fixes it at one second.
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
}

// Collector samples one member. Collect must return within a bounded time
// and honour ctx; the Cache cancels ctx when it is closed or the member is
// removed. Its error is classified, never retained: errors wrapping
// ErrParse, ErrBodyTooLarge, ErrMissingSeries or ErrUnknownEngine make the
// sample unknown, every other error makes it failed.
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
var defaultClient = &http.Client{
	Timeout: FetchTimeout,
	Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: FetchTimeout}).DialContext,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: FetchTimeout,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Collect implements Collector. Its errors never contain the URL, the
// address or the body.
func (h HTTPCollector) Collect(ctx context.Context, target Target) (scheduler.Telemetry, error) {
	client := h.Client
	if client == nil {
		client = defaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.MetricsURL, nil)
	if err != nil {
		return scheduler.Telemetry{}, ErrInvalidMetricsURL
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return scheduler.Telemetry{}, transportError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return scheduler.Telemetry{}, fmt.Errorf("%w: %d", ErrHTTPStatus, resp.StatusCode)
	}
	if resp.ContentLength > MaxBodyBytes {
		return scheduler.Telemetry{}, ErrBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return scheduler.Telemetry{}, transportError(err)
	}
	if len(body) > MaxBodyBytes {
		return scheduler.Telemetry{}, ErrBodyTooLarge
	}
	return Parse(target.Engine, bytes.NewReader(body))
}

// transportError maps a client or body-read error to ErrTimeout or
// ErrTransport, dropping the original message, which names the address.
func transportError(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return ErrTimeout
	}
	return ErrTransport
}

// MetricsURL joins a member endpoint and a metrics path into the absolute
// URL a Target needs. An empty path means DefaultMetricsPath; a non-empty
// path must start with "/". The endpoint must be an absolute http or https
// URL with a host and no query or fragment. Errors wrap ErrInvalidMetricsURL.
func MetricsURL(endpoint, path string) (string, error) {
	if path == "" {
		path = DefaultMetricsPath
	}
	if !strings.HasPrefix(path, "/") {
		return "", ErrInvalidMetricsURL
	}
	u, err := url.Parse(endpoint)
	if err != nil || !validHTTPURL(u) || u.RawQuery != "" || u.Fragment != "" {
		return "", ErrInvalidMetricsURL
	}
	joined := u.JoinPath(path)
	return joined.String(), nil
}

// validMetricsURL reports whether raw is an absolute http(s) URL with a host.
func validMetricsURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && validHTTPURL(u)
}

func validHTTPURL(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}
