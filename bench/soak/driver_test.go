package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/enginesim"
)

// failsafe bounds every request of a test; no test relies on it passing.
const failsafe = 30 * time.Second

// newEngine serves an enginesim with per-request faults allowed and zero
// latencies, serving the tier's alias, as the router would see it.
func newEngine(t *testing.T) *httptest.Server {
	t.Helper()
	cfg := enginesim.DefaultConfig()
	cfg.Model = tierAlias
	cfg.AllowFaultHeader = true
	cfg.TTFTBase, cfg.TTFTPerSeq, cfg.ITLBase, cfg.ITLPerSeq = 0, 0, 0, 0
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// TestSendVerifiesEngineBytes sends every kind of request the driver makes
// straight to an engine and checks the classification: whole answers
// verified, cut ones recognized as aborted prefixes.
func TestSendVerifiesEngineBytes(t *testing.T) {
	ts := newEngine(t)
	client := ts.Client()
	for _, tc := range []struct {
		desc string
		spec requestSpec
		want string
	}{
		{"chat", requestSpec{chat: true, tokens: 7}, outcomeOK},
		{"chat stream", requestSpec{chat: true, stream: true, tokens: 7}, outcomeOK},
		{"completion", requestSpec{tokens: 5}, outcomeOK},
		{"completion stream", requestSpec{stream: true, tokens: 5}, outcomeOK},
		{"truncated stream", requestSpec{chat: true, stream: true, tokens: 8, fault: faultTruncateSSE,
			engineFx: string(enginesim.FaultTruncateSSE)}, outcomeAborted},
		{"reset stream", requestSpec{stream: true, tokens: 8, fault: faultResetMidBody,
			engineFx: string(enginesim.FaultResetMidBody)}, outcomeAborted},
		{"client disconnect", requestSpec{chat: true, stream: true, tokens: 8, fault: faultClientDisconnect,
			disconn: true}, outcomeClientDisconnect},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			tc.spec.id = "test-1"
			rec := send(ctx, client, ts.URL, tc.spec)
			if rec.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", rec.Outcome, rec.Detail, tc.want)
			}
			if rec.End < rec.Start || rec.Start == 0 {
				t.Fatalf("start %d end %d", rec.Start, rec.End)
			}
		})
	}
}

func TestClassifyBody(t *testing.T) {
	chunk := func(s string) string { return `data: {"choices":[{"delta":{"content":"` + s + `"}}]}` + "\n\n" }
	whole := chunk("The") + chunk(" quick") + "data: [DONE]\n\n"
	for _, tc := range []struct {
		desc    string
		body    string
		readErr bool
		want    string
	}{
		{"whole stream", whole, false, outcomeOK},
		{"wrong text", chunk("The") + chunk(" slow") + "data: [DONE]\n\n", false, outcomeBadContent},
		{"no [DONE] without an error", chunk("The") + chunk(" quick"), false, outcomeBadContent},
		{"cut stream", chunk("The") + `data: {"choi`, true, outcomeAborted},
		{"cut stream with a wrong prefix", chunk("Fox"), true, outcomeBadContent},
		{"event after [DONE]", whole + chunk(" x"), false, outcomeBadContent},
		{"not a chunk", "data: {oops}\n\n", false, outcomeBadContent},
		{"not data", "event: x\n\n", false, outcomeBadContent},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var err error
			if tc.readErr {
				err = context.Canceled
			}
			got, detail := classifyBody([]byte(tc.body), err, requestSpec{chat: true, stream: true, tokens: 2})
			if got != tc.want {
				t.Fatalf("classifyBody = %s (%s), want %s", got, detail, tc.want)
			}
		})
	}
}

func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusServiceUnavailable, `{"error":{"code":"capacity_exhausted"}}`, "error:capacity_exhausted"},
		{http.StatusBadGateway, `{"error":{"code":"upstream_unavailable"}}`, "error:upstream_unavailable"},
		{http.StatusGatewayTimeout, `{"error":{"code":"upstream_timeout"}}`, "error:upstream_timeout"},
		{http.StatusServiceUnavailable, `{"error":{"code":"upstream_timeout"}}`, outcomeBadStatus},
		{http.StatusInternalServerError, `{"error":{"code":"internal_error"}}`, outcomeBadStatus},
		{http.StatusBadGateway, `not json`, outcomeBadStatus},
	} {
		resp := &http.Response{StatusCode: tc.status, Body: http.NoBody}
		resp.Body = ioNopCloser(tc.body)
		if got, _ := classifyError(resp); got != tc.want {
			t.Errorf("classifyError(%d, %s) = %s, want %s", tc.status, tc.body, got, tc.want)
		}
	}
}

// ioNopCloser is a response body of s.
func ioNopCloser(s string) *nopBody { return &nopBody{strings.NewReader(s)} }

type nopBody struct{ *strings.Reader }

func (nopBody) Close() error { return nil }

func TestFaultMixPick(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a test's reproducible draws.
	mix := faultMix{disconnect: 0.2, reset: 0.2, truncate: 0.2, stallIdle: 0.1, stallHeaders: 0.1, hostile: 0.2}
	seen := map[string]int{}
	for range 1000 {
		s := mix.pick(rng, "x")
		seen[s.fault]++
		if (s.fault == faultClientDisconnect || s.fault == faultResetMidBody || s.fault == faultTruncateSSE) && !s.stream {
			t.Fatalf("%s must be a stream: %+v", s.fault, s)
		}
		if s.tokens < minTokens || s.tokens > maxTokens {
			t.Fatalf("tokens %d", s.tokens)
		}
		if want := map[string]enginesim.Fault{faultEndlessHeader: enginesim.FaultEndlessHeader,
			faultInformationalFx: enginesim.FaultInformationalFlood}[s.fault]; want != "" && s.engineFx != string(want) {
			t.Fatalf("%s sends %q", s.fault, s.engineFx)
		}
	}
	if seen[""] != 0 || len(seen) != 7 {
		t.Fatalf("with probabilities adding up to 1 every request is faulted, each fault drawn: %v", seen)
	}
	a := faultMix{}.pick(rand.New(rand.NewPCG(3, 4)), "x") //nolint:gosec // a test's reproducible draws.
	b := faultMix{}.pick(rand.New(rand.NewPCG(3, 4)), "x") //nolint:gosec // a test's reproducible draws.
	if a != b || a.fault != "" {
		t.Fatalf("the same seed drew %+v and %+v", a, b)
	}
}

func TestErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "deadline exceeded"},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection refused"},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, "connection reset"},
		{io.ErrUnexpectedEOF, "connection closed"},
		{errors.New("Post http://127.0.0.1:1/v1/completions: boom"), "transport error"},
	} {
		if got := errorClass(tc.err); got != tc.want {
			t.Errorf("errorClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestFailedSparesRefusals: admission's refusals, its queue's included,
// are not failures of the router; a 502, a 504 or an abort is.
func TestFailedSparesRefusals(t *testing.T) {
	for _, code := range []string{"capacity_exhausted", "tier_quiesced", "no_eligible_member", "body_buffer_exhausted", "queue_full", "queue_timeout"} {
		if (requestRecord{Outcome: outcomeErrorPrefix + code}).failed() {
			t.Errorf("%s counted as a failure", code)
		}
	}
	for _, outcome := range []string{outcomeErrorPrefix + "upstream_unavailable", outcomeErrorPrefix + "upstream_timeout", outcomeAborted} {
		if !(requestRecord{Outcome: outcome}).failed() {
			t.Errorf("%s not counted as a failure", outcome)
		}
	}
}
