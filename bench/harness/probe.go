//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// maxErrorBody bounds the refusal body the probe reads for its error code:
// the router's error bodies are a few hundred bytes.
const maxErrorBody = 64 << 10

// probe is the transport of a load run's client: it times every request
// to its response headers, reads the error code of every response outside
// 2xx, which loadgen counts by status only, and keeps every response's
// X-Request-Id with its status, for the join with the router's decision
// records. It is safe for concurrent use.
type probe struct {
	next http.RoundTripper
	// now is the clock; time.Now outside tests.
	now func() time.Time

	mu sync.Mutex
	// headers holds the time to response headers of the 2xx responses.
	headers loadgen.Distribution
	// refusals counts the responses outside 2xx by refusalKey.
	refusals map[string]int
	// seen holds every response's request id and status, at most
	// maxSeenResponses of them.
	seen []seenResponse
	// unidentified counts the responses seen does not hold: without an
	// X-Request-Id, with one longer than maxSeenIDBytes, or beyond
	// maxSeenResponses.
	unidentified int
}

// newProbe returns a probe over next.
func newProbe(next http.RoundTripper, now func() time.Time) *probe {
	return &probe{next: next, now: now, refusals: map[string]int{}}
}

// newProbeClient returns a client like loadgen's own (HTTP/1.1 keep-alive
// with an idle pool for maxInFlight connections, no proxy, no compression,
// no redirects, no timeout of its own) whose transport is a probe.
func newProbeClient(maxInFlight int) (*http.Client, *probe) {
	p := newProbe(&http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: maxInFlight,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}, time.Now)
	return &http.Client{
		Transport:     p,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, p
}

// RoundTrip implements http.RoundTripper. A refusal's body is read (at most
// maxErrorBody bytes) and handed on unchanged.
func (p *probe) RoundTrip(r *http.Request) (*http.Response, error) {
	start := p.now()
	resp, err := p.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	elapsed := p.now().Sub(start)
	id := resp.Header.Get(headerRequestID)
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		p.mu.Lock()
		p.headers.Add(elapsed)
		p.see(id, resp.StatusCode)
		p.mu.Unlock()
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	code := errorCode(body)
	if err != nil {
		code = "unreadable body"
	}
	p.mu.Lock()
	p.refusals[refusalKey(resp.StatusCode, code)]++
	p.see(id, resp.StatusCode)
	p.mu.Unlock()
	return resp, nil
}

// headerRequestID is the header that carries the request id of the
// router's decision record.
const headerRequestID = "X-Request-Id"

// see keeps one response's request id and status. The caller holds p.mu.
func (p *probe) see(id string, status int) {
	if id == "" || len(id) > maxSeenIDBytes || len(p.seen) >= maxSeenResponses {
		p.unidentified++
		return
	}
	p.seen = append(p.seen, seenResponse{ID: id, Status: status})
}

// responses returns a copy of the responses seen and the count of those
// it could not name. Call it once the run using the probe ended.
func (p *probe) responses() ([]seenResponse, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen), p.unidentified
}

// snapshot returns the summary of the times to response headers and a copy
// of the refusal counts. Call it once the run using the probe ended.
func (p *probe) snapshot() (loadgen.Summary, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.refusals))
	for k, v := range p.refusals {
		out[k] += v
	}
	return p.headers.Summary(), out
}

// noCode is the code of a refusal whose body names none.
const noCode = "no code"

// errorCode returns error.code of an OpenAI-style error body, noCode when
// the body is not one or its code is not a string.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return noCode
	}
	if c, ok := e.Error.Code.(string); ok && c != "" {
		return c
	}
	return noCode
}

// refusalKey names a refusal by status and code, as "429 queue_full".
func refusalKey(status int, code string) string {
	return fmt.Sprintf("%d %s", status, code)
}

// countOf returns the sum of the counts.
func countOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
