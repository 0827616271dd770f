package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/router"
)

// TestTwoSignals: the first signal ends the drain context only, the second
// the hurry context; stop ends both and the goroutine reading the signals,
// and may be called again.
func TestTwoSignals(t *testing.T) {
	done := func(ctx context.Context) bool { return ctx.Err() != nil }
	wait := func(t *testing.T, ctx context.Context, what string) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(failSafe):
			t.Fatalf("%s did not end", what)
		}
	}
	t.Run("two signals", func(t *testing.T) {
		sigs := make(chan os.Signal, 2)
		drain, hurry, stop := twoSignals(sigs)
		defer stop()
		if done(drain) || done(hurry) {
			t.Fatal("a context ended before any signal")
		}
		sigs <- syscall.SIGTERM
		wait(t, drain, "drain")
		if done(hurry) {
			t.Fatal("hurry ended at the first signal")
		}
		sigs <- os.Interrupt
		wait(t, hurry, "hurry")
		stop()
		stop()
	})
	t.Run("stop before any signal", func(t *testing.T) {
		sigs := make(chan os.Signal, 2)
		drain, hurry, stop := twoSignals(sigs)
		stop() // returns once the goroutine returned.
		if !done(drain) || !done(hurry) {
			t.Fatal("stop left a context running")
		}
		sigs <- syscall.SIGTERM
		if len(sigs) != 1 {
			t.Fatal("a signal was read after stop")
		}
	})
}

// accessLines returns the access log's request lines.
func accessLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if line["msg"] == "request" {
			lines = append(lines, line)
		}
	}
	return lines
}

// TestRunSecondSignalEndsTheDrain: a second SIGTERM during the drain (in
// the grace, or while shutdown waits for in-flight requests) ends it at
// once: run returns long before the grace and the shutdown timeout, with a
// log line saying why, and the stream in flight is closed, its lease
// released once (the admin view counted it until then; its one request
// line says the client went away).
func TestRunSecondSignalEndsTheDrain(t *testing.T) {
	for _, grace := range []string{"50s", "0s"} {
		t.Run("grace "+grace, func(t *testing.T) {
			finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
			defer close(finish)
			up := engine(t, finish, arrived, probed)
			dir, keys := writeConfig(t, up.URL)
			// Both waits are longer than the test's own bound: run can
			// return within it only if the second signal ended the drain.
			p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
				"--api-keys-file", keys, "--access-log", "--shutdown-grace", grace, "--shutdown-timeout", "50s")
			waitReady(t, p.started, probed)
			resp := postChat(t, p.started.front, `{"model":"llama","stream":true}`)
			defer func() { _ = resp.Body.Close() }()
			<-arrived

			p.cancel() // SIGTERM.
			<-p.started.notReady
			if v := capacity(t, p.started.admin); v.Tiers[0].Active != 1 {
				t.Fatalf("active = %d while draining, want the stream's lease", v.Tiers[0].Active)
			}
			select {
			case err := <-p.result:
				t.Fatalf("run returned %v with a stream in flight", err)
			default:
			}

			p.hurry() // a second SIGTERM.
			p.stopped(t)
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Error("the stream ended cleanly; want it closed by the second signal")
			}
			logs := p.logs.String()
			if !strings.Contains(logs, "second signal: ending the drain now") {
				t.Errorf("no log line for the second signal: %s", logs)
			}
			lines := accessLines(t, logs)
			if len(lines) != 1 || lines[0]["end"] != "client_gone" || lines[0]["result"] != "admitted" {
				t.Fatalf("request lines %v, want one admitted stream ended client_gone", lines)
			}
		})
	}
}

// Bounds of floodEngine.
const (
	// maxFloodChunks bounds the chunks floodEngine writes to one request.
	maxFloodChunks = 1 << 16
	// stallProbe is how long one of floodEngine's writes may block before
	// it takes the router for stalled: the router stops reading a stream
	// only while its write to the client blocks, and a router that is
	// merely slow on a loaded machine reads well within it.
	stallProbe = 2 * time.Second
)

// floodEngine is a fake engine streaming 32 KiB chunks to each chat
// request, each write with a stallProbe deadline (a kernel timer), until
// one does not complete: then stalled gets a value and the engine ends the
// response.
func floodEngine(t *testing.T, stalled chan<- struct{}, probed chan struct{}) *httptest.Server {
	t.Helper()
	chunk := strings.Repeat("x", 32<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, probed) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for range maxFloodChunks {
			if err := rc.SetWriteDeadline(time.Now().Add(stallProbe)); err != nil {
				return
			}
			_, err := io.WriteString(w, "data: "+chunk+"\n\n")
			if err == nil {
				err = rc.Flush()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				stalled <- struct{}{}
				return
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRunSecondSignalClosesStalledClients: a stream whose client stopped
// reading blocks its handler in a write, which no cancellation ends; after
// a second signal the router waits at most hurriedShutdownTimeout for it,
// then closes its connection, and run returns.
func TestRunSecondSignalClosesStalledClients(t *testing.T) {
	stalled, probed := make(chan struct{}, 1), make(chan struct{}, 1)
	up := floodEngine(t, stalled, probed)
	dir, keys := writeConfig(t, up.URL)
	p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--api-keys-file", keys, "--shutdown-grace", "0s", "--shutdown-timeout", "50s")
	waitReady(t, p.started, probed)
	c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", p.started.front.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	body := `{"model":"llama","stream":true}`
	// The client sends its request and never reads.
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer secret\r\n"+
		"Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(failSafe):
		t.Fatal("the router did not stall on the client")
	}
	p.cancel()
	<-p.started.notReady
	p.hurry()
	p.stopped(t)
	if logs := p.logs.String(); !strings.Contains(logs, "outlived the second signal's wait") {
		t.Errorf("no log line for the stalled client's close: %s", logs)
	}
}

// TestRunPassEngineHeaders: --pass-engine-headers reaches the router (the
// named header passes, the other stripped ones do not) and a name the
// router does not strip is refused with a clear error.
func TestRunPassEngineHeaders(t *testing.T) {
	_, err := parseFlags([]string{"--tiers-dir", "d", "--node-name", "n", "--pass-engine-headers", "Sever"}, io.Discard)
	if !errors.Is(err, router.ErrPassEngineHeader) || !strings.Contains(err.Error(), "--pass-engine-headers: ") {
		t.Fatalf("--pass-engine-headers Sever: %v, want an error naming the flag", err)
	}
	c, err := parseFlags([]string{"--tiers-dir", "d", "--node-name", "n"}, io.Discard)
	if err != nil || c.passEngineHeaders != nil {
		t.Fatalf("default: %q, %v; want none", c.passEngineHeaders, err)
	}

	probed := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, probed) {
			return
		}
		w.Header().Set("Server", "vllm/0.9")
		w.Header().Set("Set-Cookie", "session=abc")
		_, _ = io.WriteString(w, "{}")
	}))
	defer up.Close()
	s, result, cancel, logs := startRouter(t, up.URL, "--pass-engine-headers", "server")
	waitReady(t, s, probed)
	resp := postChat(t, s.front, `{"model":"llama"}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if got := resp.Header.Values("Server"); resp.StatusCode != http.StatusOK || !slices.Equal(got, []string{"vllm/0.9"}) {
		t.Errorf("status %d, Server %q; want the engine's Server passed", resp.StatusCode, got)
	}
	if got := resp.Header.Values("Set-Cookie"); got != nil {
		t.Errorf("Set-Cookie %q passed; want it stripped", got)
	}
	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v; logs %s", err, logs)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return")
	}
}
