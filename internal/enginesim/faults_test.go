package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultRequest sends a chat request of 8 tokens with the fault header set
// to fault (none when empty) and returns the response, or the transport
// error.
func faultRequest(ctx context.Context, t *testing.T, url string, stream bool, fault, id string) (*http.Response, error) {
	t.Helper()
	body := `{"model":"sim/model-1","messages":[],"max_tokens":8,"stream":false}`
	if stream {
		body = strings.Replace(body, `"stream":false`, `"stream":true`, 1)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if fault != "" {
		req.Header.Set(FaultHeader, fault)
	}
	if id != "" {
		req.Header.Set(HeaderRequestID, id)
	}
	return http.DefaultClient.Do(req)
}

func TestFaultHeaderIgnoredUnlessAllowed(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	resp, err := faultRequest(ctx, t, h.ts.URL, true, string(FaultTruncateSSE), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || !bytes.HasSuffix(b, []byte(sseDone)) {
		t.Fatalf("without AllowFaultHeader the stream must end normally: err %v, tail %q", err, tail(b))
	}
}

func TestFaultHeaderRejectsInvalidValues(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AllowFaultHeader = true; c.ErrorRate = 0.5; c.Seed = 7 })
	for _, tc := range []struct {
		desc   string
		values []string
	}{
		{"unknown fault", []string{"explode"}},
		{"wrong case", []string{"Stall"}},
		{"empty value", []string{""}},
		{"two values", []string{"stall", "truncate-sse"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+"/v1/chat/completions",
				strings.NewReader(`{"messages":[],"max_tokens":2}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header[FaultHeader] = tc.values
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || path(decodeJSON(t, b), "error", "code") != "invalid_fault" {
				t.Fatalf("status %d body %s, want 400 invalid_fault", resp.StatusCode, b)
			}
		})
	}
	// Rejected requests consumed no error-rate decision and held no slot.
	if seq := h.srv.errorSeq.Load(); seq != 0 {
		t.Fatalf("rejected requests consumed %d error decisions", seq)
	}
	if st := h.e.State(); st.MaxRunning != 0 || st.InFlight != 0 {
		t.Fatalf("state after rejections: %+v", st)
	}
}

// TestFaultsMidBody checks both mid-body faults for streaming and
// non-streaming requests: the client reads half of the response, then a
// reset (ECONNRESET) or a cut body (unexpected EOF), and the engine no
// longer counts the request.
func TestFaultsMidBody(t *testing.T) {
	for _, tc := range []struct {
		fault   Fault
		stream  bool
		wantErr error
	}{
		{FaultResetMidBody, true, syscall.ECONNRESET},
		{FaultResetMidBody, false, syscall.ECONNRESET},
		{FaultTruncateSSE, true, io.ErrUnexpectedEOF},
		{FaultTruncateSSE, false, io.ErrUnexpectedEOF},
	} {
		name := string(tc.fault) + map[bool]string{true: "/stream", false: "/non-stream"}[tc.stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.AllowFaultHeader = true })
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			resp, err := faultRequest(ctx, t, h.ts.URL, tc.stream, string(tc.fault), "")
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("read error %v, want %v (read %q)", err, tc.wantErr, b)
			}
			if tc.stream {
				// Tokens 0..4 of 8 were sent, and nothing after.
				if !bytes.Contains(b, []byte(`"content":" jumps"`)) || bytes.Contains(b, []byte(`"content":" over"`)) ||
					bytes.Contains(b, []byte("[DONE]")) {
					t.Fatalf("stream bytes %q are not the first five tokens", b)
				}
			} else {
				full := int(resp.ContentLength)
				if full <= 0 || len(b) != full/2 {
					t.Fatalf("read %d bytes of a %d-byte body, want half", len(b), full)
				}
			}
			h.await("no request in flight", func(s State) bool { return s.InFlight == 0 && s.Running == 0 })
		})
	}
}

// TestFaultStalls checks that stall holds the body after the headers (and a
// stream's first token) and stall-headers holds the headers, each until the
// client goes away.
func TestFaultStalls(t *testing.T) {
	for _, tc := range []struct {
		fault  Fault
		stream bool
	}{
		{FaultStall, true},
		{FaultStall, false},
		{FaultStallHeaders, true},
		{FaultStallHeaders, false},
	} {
		name := string(tc.fault) + map[bool]string{true: "/stream", false: "/non-stream"}[tc.stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.AllowFaultHeader = true })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				resp *http.Response
				err  error
			}
			got := make(chan outcome, 1)
			go func() {
				resp, err := faultRequest(ctx, t, h.ts.URL, tc.stream, string(tc.fault), "") //nolint:bodyclose // the receiver closes it.
				got <- outcome{resp, err}
			}()
			h.await("the request stalled", func(s State) bool { return s.ClockWaits == 1 })
			if tc.fault == FaultStall {
				o := <-got
				if o.err != nil || o.resp.StatusCode != http.StatusOK {
					t.Fatalf("stall: %v, want 200 headers", o.err)
				}
				if tc.stream {
					line, err := bufio.NewReader(o.resp.Body).ReadString('\n')
					if err != nil || !strings.Contains(line, `"role":"assistant"`) {
						t.Fatalf("first frame %q, %v", line, err)
					}
				}
				cancel()
				_, _ = io.Copy(io.Discard, o.resp.Body)
				_ = o.resp.Body.Close()
			} else {
				select {
				case o := <-got:
					t.Fatalf("stall-headers answered: %+v", o)
				default:
				}
				cancel()
				if o := <-got; o.err == nil {
					_ = o.resp.Body.Close()
					t.Fatal("stall-headers answered after the client left")
				}
			}
			h.await("no request in flight", func(s State) bool { return s.InFlight == 0 && s.ClockWaits == 0 })
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestLog checks the request log's lines: the request id, and a live
// count that includes every request being served and excludes one whose
// client went away although its handler may still run.
func TestRequestLog(t *testing.T) {
	cfg := zeroLatencyConfig()
	cfg.AllowFaultHeader = true
	var log syncBuffer
	srv, err := NewServer(cfg, WithRequestLog(&log))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnContext = ConnContext
	ts.Start()
	defer ts.Close()
	e := srv.Engine()
	awaitState := func(what string, cond func(State) bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		defer cancel()
		if err := e.Await(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()

	// Two stalled requests, then one that completes: live 1, 2, 3.
	stallCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	for i, id := range []string{"stalled-1", "stalled-2"} {
		go func() {
			resp, err := faultRequest(stallCtx, t, ts.URL, false, string(FaultStallHeaders), id)
			if err == nil {
				_ = resp.Body.Close()
			}
			done <- struct{}{}
		}()
		awaitState(id+" stalled", func(s State) bool { return s.ClockWaits == i+1 })
	}
	resp, err := faultRequest(ctx, t, ts.URL, false, "", "third")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	stop()
	<-done
	<-done
	// The stalled clients are gone: the next request counts only itself.
	resp, err = faultRequest(ctx, t, ts.URL, false, "", "fourth")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()

	lines := log.lines(t)
	want := []struct {
		id   string
		live float64
	}{{"stalled-1", 1}, {"stalled-2", 2}, {"third", 3}, {"fourth", 1}}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		if lines[i]["id"] != w.id || lines[i]["live"] != w.live || lines[i]["endpoint"] != "chat_completions" {
			t.Fatalf("line %d = %v, want id %s live %v", i, lines[i], w.id, w.live)
		}
		if _, ok := lines[i]["t"].(float64); !ok {
			t.Fatalf("line %d has no time: %v", i, lines[i])
		}
	}
}

func TestText(t *testing.T) {
	if got, want := Text(3), "The quick brown"; got != want {
		t.Fatalf("Text(3) = %q, want %q", got, want)
	}
	if Text(0) != "" {
		t.Fatalf("Text(0) = %q", Text(0))
	}
}

// TestFaultHostileHeads reads 256 KiB of each hostile fault on a raw
// connection: endless-header is a 200 status line and one header line of
// "x" that never ends, informational-flood "100 Continue" responses without
// end; neither holds a slot, and both end when the client closes.
func TestFaultHostileHeads(t *testing.T) {
	const read = 256 << 10
	for _, f := range []Fault{FaultEndlessHeader, FaultInformationalFlood} {
		t.Run(string(f), func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.AllowFaultHeader = true })
			var d net.Dialer
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(h.ts.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(failsafe))
			body := `{"model":"sim/model-1","messages":[],"max_tokens":8}`
			req := "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n" +
				FaultHeader + ": " + string(f) + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, read)
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Fatalf("read %d bytes: %v", read, err)
			}
			first, chunk := hostileHead(f)
			want := append(first, bytes.Repeat(chunk, read/len(chunk)+1)...)[:read]
			if !bytes.Equal(got, want) {
				t.Fatalf("the first bytes differ: %q...", got[:80])
			}
			if s := h.e.State(); s.InFlight != 1 || s.Running != 0 || s.Waiting != 0 {
				t.Fatalf("state %+v, want the one request in its handler, holding no slot", s)
			}
			// The handler ends when the client closes the connection.
			_ = conn.Close()
			h.await("no request in flight", func(s State) bool { return s.InFlight == 0 })
		})
	}
}
