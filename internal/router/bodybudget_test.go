package router

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// gatedBody is a request body that stops, once at bytes have been read,
// until gate is closed; reached is closed when it stops. The router
// reserves a buffer's capacity before reading into it, so when reached is
// closed the body's buffer is charged to the budget.
type gatedBody struct {
	data    []byte
	off     int
	at      int
	reached chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func newGatedBody(data []byte, at int) *gatedBody {
	return &gatedBody{data: data, at: at, reached: make(chan struct{}), gate: make(chan struct{})}
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.off >= b.at {
		b.once.Do(func() { close(b.reached) })
		<-b.gate
	}
	if b.off == len(b.data) {
		return 0, io.EOF
	}
	end := len(b.data)
	if b.off < b.at {
		end = b.at
	}
	n := copy(p, b.data[b.off:end])
	b.off += n
	return n, nil
}

func (b *gatedBody) Close() error { return nil }

// paddedChat is a chat body for model of about n bytes.
func paddedChat(model string, n int) []byte {
	return []byte(`{"model":"` + model + `","pad":"` + strings.Repeat("x", n) + `"}`)
}

// slowPost serves a request whose body stops after at of its bytes (a
// slow client) on a goroutine; the recorder arrives on the returned
// channel once the body was let go on and the request was served.
func slowPost(f *fixture, body *gatedBody) <-chan *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, pathChatCompletions, nil)
	req.Body, req.ContentLength = body, -1
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		f.rt.ServeHTTP(w, req)
		done <- w
	}()
	select {
	case <-body.reached:
	case <-time.After(failSafe):
		f.t.Fatal("the slow body was not read")
	}
	return done
}

// TestBodyBudget proves the budget of buffered request bodies
// (Options.MaxBufferedBodyBytes): while slow clients hold the share of
// large buffers, a large body is refused with 503 body_buffer_exhausted and
// Retry-After: 1 before any reservation (no lease, no member reached, a
// gate refusal in the decision record), an ordinary body still passes on
// the quarter kept for it, and once the slow bodies are served the large
// body passes. Every buffer's charge is given back: the router holds no
// body bytes at the end.
func TestBodyBudget(t *testing.T) {
	// 1 MiB bodies and the least budget for them, 2 MiB + 2 bytes: large
	// buffers may hold 1.5 MiB + 2 bytes of it.
	const maxBody, budget = 1 << 20, 2<<20 + 2
	f := newFixture(t, fixtureOptions{maxBody: maxBody, maxBuffered: budget})
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 8}}, upstreamModel(v1alpha1.UpstreamModelAlias)))

	// Two slow clients: 600 KiB of 700 KiB arrived, in a buffer grown to
	// 1 MiB, and 400 KiB of 450 KiB in one of 512 KiB; the rest does not
	// come yet. Together they hold the large share.
	slow := []*gatedBody{newGatedBody(paddedChat("llama", 700<<10), 600<<10), newGatedBody(paddedChat("llama", 450<<10), 400<<10)}
	var done []<-chan *httptest.ResponseRecorder
	for _, b := range slow {
		done = append(done, slowPost(f, b))
	}
	if held, limit := f.rt.BufferedBodyBytes(); held != 3<<19 || limit != budget {
		t.Fatalf("held %d of %d, want the slow bodies' %d of %d", held, limit, 3<<19, budget)
	}

	large := string(paddedChat("llama", 600<<10))
	resp, body := f.mustPost(pathChatCompletions, large, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != "body_buffer_exhausted" ||
		resp.Header.Get("Retry-After") != "1" || resp.Header.Get(headerTier) != "" {
		t.Fatalf("large body while the budget is held: %d %s %v, want 503 body_buffer_exhausted with Retry-After: 1", resp.StatusCode, body, resp.Header)
	}
	o := f.outcome()
	if o.Result != ResultRefused || o.Code != "body_buffer_exhausted" || o.Tier != "" || o.Member != "" {
		t.Fatalf("outcome %+v, want a gate refusal body_buffer_exhausted", o)
	}
	stored, ok := f.evidence.Find(o.RequestID)
	if !ok {
		t.Fatal("no decision record")
	}
	line, err := stored.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The record reads back: a 503 gate refusal is valid for this code.
	rec, err := evidence.ParseRecord(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || rec.Outcome != evidence.OutcomeRefused || rec.Code != evidence.CodeBodyBufferExhausted || rec.Status != 503 {
		t.Fatalf("decision record %+v, %v", rec, err)
	}
	if n := up.requests.Load(); n != 0 || f.totalReleases() != 0 {
		t.Fatalf("the refused request reached the member (%d requests) or made a lease (%d releases)", n, f.totalReleases())
	}

	if resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("ordinary body while the large share is held: %d %s", resp.StatusCode, body)
	}
	f.outcome()

	for i, b := range slow {
		close(b.gate)
		if w := <-done[i]; w.Code != http.StatusOK {
			t.Fatalf("slow body %d: %d %s", i, w.Code, w.Body)
		}
		f.outcome()
	}
	if resp, body := f.mustPost(pathChatCompletions, large, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("large body once the slow ones were served: %d %s", resp.StatusCode, body)
	}
	f.outcome()
	if held, _ := f.rt.BufferedBodyBytes(); held != 0 {
		t.Fatalf("the router still holds %d body bytes", held)
	}
	f.assertIdle("ns/llama")
}

// TestBodyBudgetCountsTheRewrite proves the copy of a body rewritten for
// the tier's servedModel is charged too, at the gate: a body whose copy
// does not fit is refused before any reservation, one that fits is
// served, and neither leaves a byte charged.
func TestBodyBudgetCountsTheRewrite(t *testing.T) {
	const maxBody, budget = 1 << 20, 2<<20 + 2
	f := newFixture(t, fixtureOptions{maxBody: maxBody, maxBuffered: budget})
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity, []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 8}}))

	// 600 KiB read into a 1 MiB buffer, and its copy of 600 KiB more: above
	// the large share, 1.5 MiB + 2 bytes.
	resp, body := f.mustPost(pathChatCompletions, string(paddedChat("llama", 600<<10)), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != "body_buffer_exhausted" {
		t.Fatalf("body and copy above the budget: %d %s, want 503 body_buffer_exhausted", resp.StatusCode, body)
	}
	if o := f.outcome(); o.Result != ResultRefused || o.Tier != "" {
		t.Fatalf("outcome %+v, want a gate refusal", o)
	}
	if up.requests.Load() != 0 || f.totalReleases() != 0 {
		t.Fatal("the refused request reached the member or made a lease")
	}
	small := paddedChat("llama", 100<<10)
	if resp, body := f.mustPost(pathChatCompletions, string(small), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("body and copy within the budget: %d %s", resp.StatusCode, body)
	}
	f.outcome()
	if seen := up.waitArrival(t); !bytes.Contains(seen.body, []byte(`"model":"served/model"`)) {
		t.Fatalf("the member read %.60q, not the served model", seen.body)
	}
	if held, _ := f.rt.BufferedBodyBytes(); held != 0 {
		t.Fatalf("the router still holds %d body bytes", held)
	}
}

// TestBodyReleasedAtHeaders proves a request's body buffers are given back
// when the member's response headers arrive: a stream that runs on holds
// no body bytes.
func TestBodyReleasedAtHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	finish := make(chan struct{})
	up.handle(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		<-finish
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity, []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 8}}))
	resp, err := f.post(context.Background(), pathChatCompletions, string(paddedChat("llama", 200<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if held, _ := f.rt.BufferedBodyBytes(); held != 0 {
		t.Fatalf("a running stream holds %d body bytes, want 0", held)
	}
	close(finish)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if o := f.outcome(); o.End != EndComplete {
		t.Fatalf("end %q", o.End)
	}
}
