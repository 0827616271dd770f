package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/enginesim"
)

// Driver bounds.
const (
	// requestTimeout bounds one request of the driver. Every exchange ends
	// within the tier's 1 s timeouts plus a few milliseconds of generation,
	// so reaching it means the router hung on a request.
	requestTimeout = 15 * time.Second
	// refusalPause is how long a worker waits after a 503, 429 or 502 before
	// its next request: these answers are instant, and without a pause the
	// workers would spin on them instead of sending requests that reach
	// engines. (Retry-After's 1 s would leave the members idle.)
	refusalPause = 10 * time.Millisecond
	// maxResponseBytes bounds a response body the driver reads: the
	// soak's responses are a few kilobytes.
	maxResponseBytes = 1 << 20
	// minTokens and maxTokens bound each request's max_tokens: short
	// generations, so that the soak sends many requests.
	minTokens, maxTokens = 4, 16
)

// Per-request fault classes, as counted in the report.
const (
	faultClientDisconnect = "client_disconnect"
	faultResetMidBody     = "reset_mid_body"
	faultTruncateSSE      = "truncate_sse"
	faultStallIdle        = "stall_idle"
	faultStallHeaders     = "stall_headers"
	// A hostile member: a response header line that never ends, or
	// 100 Continue without end (the router's bounds on response heads).
	faultEndlessHeader   = "endless_header"
	faultInformationalFx = "informational_flood"
)

// Outcomes of a request, as the driver classifies them.
const (
	outcomeOK               = "ok"
	outcomeAborted          = "aborted"
	outcomeClientDisconnect = "client_disconnect"
	outcomeBadContent       = "bad_content"
	outcomeBadStatus        = "bad_status"
	outcomeTransportError   = "transport_error"
	outcomeDriverTimeout    = "driver_timeout"
	// outcomeErrorPrefix prefixes a documented router error code.
	outcomeErrorPrefix = "error:"
)

// documentedErrors maps each status the router answers with on its own
// (docs/ROUTER.md#4-errors) to the error codes it may carry.
var documentedErrors = map[int][]string{
	http.StatusBadGateway:         {"upstream_unavailable"},
	http.StatusTooManyRequests:    {"queue_full"},
	http.StatusServiceUnavailable: {"capacity_exhausted", "tier_quiesced", "no_eligible_member", "body_buffer_exhausted", "queue_timeout"},
	http.StatusGatewayTimeout:     {"upstream_timeout"},
}

// errContent reports response bytes that are not what the engine sends.
var errContent = errors.New("soak: response content differs from the engine's")

// requestSpec is one request the driver sends.
type requestSpec struct {
	id       string
	chat     bool // chat completions; else completions
	stream   bool
	tokens   int
	fault    string // a per-request fault class, or ""
	disconn  bool   // the client disconnects after the first event
	engineFx string // the X-Enginesim-Fault value, or ""
}

// faultMix is the probability of each per-request fault; the rest are
// plain requests.
type faultMix struct {
	disconnect, reset, truncate, stallIdle, stallHeaders float64
	// hostile is split evenly between the two hostile member faults.
	hostile float64
}

// pick draws one request from rng.
func (m faultMix) pick(rng *rand.Rand, id string) requestSpec {
	s := requestSpec{
		id:     id,
		chat:   rng.IntN(3) != 0,
		stream: rng.IntN(2) == 0,
		tokens: minTokens + rng.IntN(maxTokens-minTokens+1),
	}
	x := rng.Float64()
	for _, f := range []struct {
		p      float64
		class  string
		header enginesim.Fault
		stream bool // the fault needs a stream
	}{
		{m.disconnect, faultClientDisconnect, enginesim.FaultNone, true},
		{m.reset, faultResetMidBody, enginesim.FaultResetMidBody, true},
		{m.truncate, faultTruncateSSE, enginesim.FaultTruncateSSE, true},
		{m.stallIdle, faultStallIdle, enginesim.FaultStall, false},
		{m.stallHeaders, faultStallHeaders, enginesim.FaultStallHeaders, false},
		{m.hostile / 2, faultEndlessHeader, enginesim.FaultEndlessHeader, false},
		{m.hostile / 2, faultInformationalFx, enginesim.FaultInformationalFlood, false},
	} {
		if x < f.p {
			s.fault, s.engineFx = f.class, string(f.header)
			s.disconn = f.class == faultClientDisconnect
			if f.stream {
				s.stream = true
			}
			return s
		}
		x -= f.p
	}
	return s
}

// body renders the request body.
func (s requestSpec) body() []byte {
	if s.chat {
		return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":%t}`,
			tierAlias, s.tokens, s.stream)
	}
	return fmt.Appendf(nil, `{"model":%q,"prompt":"hi","max_tokens":%d,"stream":%t}`, tierAlias, s.tokens, s.stream)
}

// path returns the route of the request.
func (s requestSpec) path() string {
	if s.chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// requestRecord is one request as the driver saw it.
type requestRecord struct {
	ID      string `json:"id"`
	Start   int64  `json:"start"` // Unix nanoseconds
	End     int64  `json:"end"`
	Member  string `json:"member,omitempty"`
	Stream  bool   `json:"stream"`
	Fault   string `json:"fault,omitempty"`
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// failed reports whether the request got neither the engine's whole answer
// nor a refusal by admission (its queue's included): a 502, a 504, an
// aborted body or a bad answer. Client disconnects are the client's doing.
func (r requestRecord) failed() bool {
	switch r.Outcome {
	case outcomeOK, outcomeClientDisconnect:
		return false
	case outcomeErrorPrefix + "capacity_exhausted", outcomeErrorPrefix + "tier_quiesced",
		outcomeErrorPrefix + "no_eligible_member", outcomeErrorPrefix + "body_buffer_exhausted",
		outcomeErrorPrefix + "queue_full", outcomeErrorPrefix + "queue_timeout":
		return false
	}
	return true
}

// send sends one request through the router and classifies what came back.
func send(ctx context.Context, client *http.Client, baseURL string, s requestSpec) (rec requestRecord) {
	rec = requestRecord{ID: s.id, Stream: s.stream, Fault: s.fault, Start: time.Now().UnixNano()}
	defer func() { rec.End = time.Now().UnixNano() }()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+s.path(), bytes.NewReader(s.body()))
	if err != nil {
		rec.Outcome, rec.Detail = outcomeTransportError, errorClass(err)
		return rec
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", s.id)
	if s.engineFx != "" {
		req.Header.Set(enginesim.FaultHeader, s.engineFx)
	}
	resp, err := client.Do(req)
	if err != nil {
		rec.Outcome, rec.Detail = outcomeTransportError, errorClass(err)
		if errors.Is(err, context.DeadlineExceeded) {
			rec.Outcome = outcomeDriverTimeout
		}
		return rec
	}
	defer func() { _ = resp.Body.Close() }()
	rec.Status = resp.StatusCode
	rec.Member = resp.Header.Get("X-Sluice-Member")
	if resp.StatusCode != http.StatusOK {
		rec.Outcome, rec.Detail = classifyError(resp)
		return rec
	}
	if s.disconn {
		// Read the first event, then go away mid-stream.
		_, _ = bufio.NewReader(resp.Body).ReadString('\n')
		cancel()
		rec.Outcome = outcomeClientDisconnect
		return rec
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	rec.Outcome, rec.Detail = classifyBody(body, readErr, s)
	if rec.Outcome == outcomeAborted && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rec.Outcome = outcomeDriverTimeout
	}
	return rec
}

// errorClass names the kind of a transport error without its text, which
// holds the request's URL.
func errorClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	default:
		return "transport error"
	}
}

// classifyError checks a non-200 answer against the router's documented
// errors.
func classifyError(resp *http.Response) (string, string) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return outcomeBadStatus, fmt.Sprintf("status %d, body unreadable", resp.StatusCode)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	for _, code := range documentedErrors[resp.StatusCode] {
		if e.Error.Code == code {
			return outcomeErrorPrefix + code, ""
		}
	}
	return outcomeBadStatus, fmt.Sprintf("status %d code %q", resp.StatusCode, e.Error.Code)
}

// classifyBody checks a 200 body against what the engine sends for s: the
// whole generation, or, when the read failed, a valid prefix of it.
func classifyBody(body []byte, readErr error, s requestSpec) (string, string) {
	var (
		text     string
		complete bool
		err      error
	)
	if s.stream {
		text, complete, err = streamText(body, s.chat)
	} else if readErr == nil {
		text, err = bodyText(body, s.chat)
		complete = err == nil
	}
	want := enginesim.Text(s.tokens)
	switch {
	case err != nil:
		return outcomeBadContent, err.Error()
	case readErr != nil:
		if !strings.HasPrefix(want, text) {
			return outcomeBadContent, "aborted stream's text is not a prefix of the generation"
		}
		return outcomeAborted, ""
	case !complete:
		return outcomeBadContent, "the body ended without its terminal event"
	case text != want:
		return outcomeBadContent, "generated text differs"
	}
	return outcomeOK, ""
}

// bodyText returns the generated text of a non-streaming body.
func bodyText(body []byte, chat bool) (string, error) {
	var v struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Choices) != 1 {
		return "", fmt.Errorf("%w: not one choice", errContent)
	}
	if chat {
		return v.Choices[0].Message.Content, nil
	}
	return v.Choices[0].Text, nil
}

// streamText concatenates the generated text of a stream's complete events
// and reports whether the stream ended with data: [DONE]. An incomplete last
// event (a cut stream) is ignored; an event after [DONE] or a complete event
// that is not a valid chunk is an error.
func streamText(body []byte, chat bool) (string, bool, error) {
	var (
		sb   strings.Builder
		done bool
	)
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			break // an incomplete event
		}
		ev := body[:i]
		body = body[i+2:]
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		switch {
		case !ok:
			return "", false, fmt.Errorf("%w: an event without data", errContent)
		case done:
			return "", false, fmt.Errorf("%w: an event after [DONE]", errContent)
		case string(data) == "[DONE]":
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return "", false, fmt.Errorf("%w: an event that is not a chunk", errContent)
		}
		for _, ch := range c.Choices {
			if chat {
				sb.WriteString(ch.Delta.Content)
			} else {
				sb.WriteString(ch.Text)
			}
		}
	}
	return sb.String(), done, nil
}

// driver runs the workers.
type driver struct {
	client  *http.Client
	baseURL string
	mix     faultMix
	seed    uint64
	seq     atomic.Uint64
	out     chan<- requestRecord
}

// worker sends requests until ctx ends, one at a time.
func (d *driver) worker(ctx context.Context, n int) {
	rng := rand.New(rand.NewPCG(d.seed, uint64(n))) //nolint:gosec // a reproducible workload, not a secret.
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	for ctx.Err() == nil {
		id := "soak-" + strconv.FormatUint(d.seed, 10) + "-" + strconv.FormatUint(d.seq.Add(1), 10)
		rec := send(ctx, d.client, d.baseURL, d.mix.pick(rng, id))
		if ctx.Err() != nil && rec.Outcome != outcomeOK {
			return // cut by the end of the run, not by the router.
		}
		d.out <- rec
		if rec.Status == http.StatusServiceUnavailable || rec.Status == http.StatusTooManyRequests || rec.Status == http.StatusBadGateway {
			pause.Reset(refusalPause)
			select {
			case <-ctx.Done():
				return
			case <-pause.C:
			}
		}
	}
}
