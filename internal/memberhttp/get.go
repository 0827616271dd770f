package memberhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Errors returned by Get and JoinURL. Callers classify them; none of them
// quotes the URL, the address or the body.
var (
	// ErrInvalidURL reports a URL or endpoint that is not an absolute http or
	// https URL with a host and without user info, query or fragment.
	ErrInvalidURL = errors.New("memberhttp: invalid URL")
	// ErrTransport reports a request that failed before a complete response
	// body was read.
	ErrTransport = errors.New("memberhttp: request failed")
	// ErrTimeout reports a request that did not finish within its bound.
	ErrTimeout = errors.New("memberhttp: request timed out")
	// ErrHTTPStatus reports a response whose status is not 2xx.
	ErrHTTPStatus = errors.New("memberhttp: non-2xx status")
	// ErrBodyTooLarge reports a body larger than the caller's bound.
	ErrBodyTooLarge = errors.New("memberhttp: body exceeds the size bound")
)

// idleConnTimeout closes a member connection idle for longer than a few
// refresh intervals; one idle connection per member is kept in between.
const idleConnTimeout = 30 * time.Second

// NewClient returns a client for side endpoints: no proxy, no redirects, one
// idle connection per member, and timeout applied to the dial, the response
// headers and the whole exchange.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
			MaxIdleConnsPerHost:   1,
			IdleConnTimeout:       idleConnTimeout,
			ResponseHeaderTimeout: timeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Get fetches rawURL with client within timeout and returns the body. It
// reads at most maxBytes+1 bytes, so a body of exactly maxBytes is accepted
// and a larger one is ErrBodyTooLarge, as is a declared Content-Length above
// maxBytes. accept, when not empty, is sent as the Accept header.
func Get(ctx context.Context, client *http.Client, rawURL, accept string, timeout time.Duration, maxBytes int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, ErrInvalidURL
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%w: %d", ErrHTTPStatus, resp.StatusCode)
	}
	if resp.ContentLength > maxBytes {
		return nil, ErrBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, transportError(err)
	}
	if int64(len(body)) > maxBytes {
		return nil, ErrBodyTooLarge
	}
	return body, nil
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

// JoinURL appends path to a member endpoint and returns the absolute URL.
// The endpoint must be an absolute http or https URL with a host and
// without user info, query or fragment, and path must start with "/";
// otherwise the error is ErrInvalidURL.
func JoinURL(endpoint, path string) (string, error) {
	if len(path) == 0 || path[0] != '/' {
		return "", ErrInvalidURL
	}
	u, err := url.Parse(endpoint)
	if err != nil || !ValidURL(u) || u.RawQuery != "" || u.Fragment != "" {
		return "", ErrInvalidURL
	}
	return u.JoinPath(path).String(), nil
}

// ValidURL reports whether u is an absolute http or https URL with a host
// and without user info.
func ValidURL(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}
