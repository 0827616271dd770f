package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// queuePollInterval is how often TestRunHandoverRefusesWaiters reads the
// admin API for a request reaching the queue: it arrives over loopback,
// which nothing else signals.
const queuePollInterval = 5 * time.Millisecond

// TestRunHandoverRefusesWaiters replaces a router whose tier has a queue:
// while the first router still admits, its waiting request waits there;
// the moment it hands the tier's admission over to the second, the waiting
// request gets 503 router_handed_over with Retry-After (never left
// hanging), the stream in flight finishes whole, and the second router
// serves new requests, its counts holding only the adopted stream.
func TestRunHandoverRefusesWaiters(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 1)
	up := fastEngine(t, release, streaming)
	dir, keys := writeTier(t, fmt.Sprintf(`  members:
  - {id: gpu0, endpoint: %q, maxConcurrency: 1}
  queue: {maxRequests: 4, maxWait: 1m}
`, up.URL))
	first := launch(t, rolloutArgs(dir, keys, "127.0.0.1:0", "127.0.0.1:0")...)
	front, admin := first.started.front.String(), first.started.admin.String()

	streamDone := make(chan error, 1)
	go func() {
		streamDone <- chat(&http.Client{Transport: &http.Transport{}}, front, `{"model":"llama","stream":true}`)
	}()
	select {
	case <-streaming:
	case <-time.After(failSafe):
		t.Fatal("the stream did not start")
	}
	type reply struct {
		status     int
		body       string
		retryAfter string
		err        error
	}
	waiter := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+front+"/v1/chat/completions",
			strings.NewReader(`{"model":"llama"}`))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			waiter <- reply{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		waiter <- reply{status: resp.StatusCode, body: string(b), retryAfter: resp.Header.Get("Retry-After")}
	}()
	poll := time.NewTicker(queuePollInterval)
	defer poll.Stop()
	deadline := time.NewTimer(failSafe)
	defer deadline.Stop()
	for capacity(t, first.started.admin).Tiers[0].Queue.Waiting != 1 {
		select {
		case <-poll.C:
		case <-deadline.C:
			t.Fatal("the request never waited in the first router's queue")
		}
	}
	select {
	case r := <-waiter:
		t.Fatalf("the waiting request ended while the first router admits: %+v", r)
	default:
	}

	second := launch(t, rolloutArgs(dir, keys, front, admin)...)
	select {
	case r := <-waiter:
		if r.err != nil || r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"router_handed_over"`) || r.retryAfter != "1" {
			t.Fatalf("the waiting request at the hand-over: %+v, want 503 router_handed_over with Retry-After: 1", r)
		}
	case <-time.After(failSafe):
		t.Fatal("the waiting request was left hanging at the hand-over")
	}
	close(release)
	if err := <-streamDone; err != nil {
		t.Fatalf("the stream in flight at the hand-over: %v", err)
	}
	if err := chat(&http.Client{Transport: &http.Transport{}}, front, `{"model":"llama"}`); err != nil {
		t.Fatalf("a request after the hand-over: %v", err)
	}
	first.cancel()
	first.stopped(t)
	// Durations are logged in human units, as CONFIGURATION.md writes them.
	if logs := first.logs.String(); !strings.Contains(logs, `"msg":"shutting down","grace":"2s","timeout":"10s"`) {
		t.Errorf("the shutdown line does not give its durations in human units:\n%s", logs)
	}
	v := capacity(t, second.started.admin).Tiers[0]
	if v.Active != 0 || v.Queue.Waiting != 0 {
		t.Errorf("the second router holds %d leases and %d waiting, want none", v.Active, v.Queue.Waiting)
	}
	second.cancel()
	second.stopped(t)
}
