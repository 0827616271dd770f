package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// failsafe bounds every wait of a test so that a bug fails the test instead
// of hanging it; no test relies on it passing.
const failsafe = 30 * time.Second

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// zeroLatencyConfig is DefaultConfig with every simulated duration zero.
func zeroLatencyConfig() Config {
	c := DefaultConfig()
	c.TTFTBase, c.TTFTPerSeq, c.ITLBase, c.ITLPerSeq = 0, 0, 0, 0
	c.Model = "sim/model-1"
	return c
}

// harness is a Server on a fake clock behind an httptest.Server.
type harness struct {
	t   *testing.T
	fc  *clocktesting.FakeClock
	srv *Server
	e   *Engine
	ts  *httptest.Server
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := zeroLatencyConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	fc := clocktesting.NewFakeClock(epoch)
	srv, err := NewServer(cfg, WithClock(fc))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &harness{t: t, fc: fc, srv: srv, e: srv.Engine(), ts: ts}
}

// await waits until cond holds for the engine state.
func (h *harness) await(what string, cond func(State) bool) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	if err := h.e.Await(ctx, cond); err != nil {
		h.t.Fatalf("waiting for %s: %v (state %+v)", what, err, h.e.State())
	}
}

// result is a fully read response.
type result struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// do sends one request and reads the whole response.
func (h *harness) do(ctx context.Context, method, path, body string) result {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, rd)
	if err != nil {
		return result{err: err}
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// must sends one request and fails the test on a transport error.
func (h *harness) must(method, path, body string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	r := h.do(ctx, method, path, body)
	if r.err != nil {
		h.t.Fatalf("%s %s: %v", method, path, r.err)
	}
	return r
}

// async sends one request on its own goroutine; the channel yields its
// result.
func (h *harness) async(ctx context.Context, method, path, body string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- h.do(ctx, method, path, body) }()
	return ch
}

// receive waits for an async result.
func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(failsafe):
		t.Fatal("no response before the failsafe timeout")
		return result{}
	}
}

// sseFrame is one parsed SSE frame.
type sseFrame struct {
	event string
	data  string
}

// parseSSE splits a complete SSE body into frames. It fails the test when
// the body does not end with a blank line or a frame has a line that is not
// an event or data field.
func parseSSE(t *testing.T, body []byte) []sseFrame {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("SSE body does not end with a blank line: %q", tail(body))
	}
	var frames []sseFrame
	for _, raw := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var f sseFrame
		for _, line := range strings.Split(raw, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				f.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("SSE line is neither event nor data: %q", line)
			}
		}
		frames = append(frames, f)
	}
	return frames
}

func tail(b []byte) []byte {
	if len(b) > 200 {
		return b[len(b)-200:]
	}
	return b
}

// decodeJSON unmarshals b into a generic map, failing the test on error.
func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return m
}

// path walks nested maps and slices of a decoded JSON value.
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}
