package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/version"
)

// failsafe bounds every wait so that a bug fails the test instead of hanging
// it; no test relies on it passing.
const failsafe = 30 * time.Second

func TestRunRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"unknown flag", []string{"--no-such-flag"}, "flag provided but not defined"},
		{"stray argument", []string{"serve"}, "unexpected arguments [\"serve\"]\nRun 'enginesim --help' for usage."},
		{"unknown flavor", []string{"--flavor=triton"}, "unknown metrics flavor"},
		{"invalid config", []string{"--hidden-load=16", "--max-num-seqs=16"}, "hidden-load"},
		{"invalid log level", []string{"--log-level=loud"}, "is not a log level"},
		{"negative load time", []string{"--load-time=-1s"}, "--load-time must be within 0..10m0s"},
		{"load time out of bounds", []string{"--load-time=11m"}, "--load-time must be within 0..10m0s"},
		{"unusable listen address", []string{"--listen=256.0.0.1:1"}, "listen failed"},
		{"unwritable request log", []string{"--request-log=/nonexistent-dir/requests.jsonl"}, "cannot open the request log"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, io.Discard, &stderr); code == 0 {
				t.Fatalf("run(%v) = 0, want a failure", tc.args)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
}

// lineWriter collects log output and reports the first line containing a
// substring.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	match string
	found chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, line := range strings.Split(string(p), "\n") {
		if w.match != "" && strings.Contains(line, w.match) {
			w.found <- line
			w.match = ""
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRunServesUntilSIGTERM also checks that --request-log appends one line
// per inference request with its X-Request-Id, and that
// --allow-fault-header lets a request choose a fault.
func TestRunServesUntilSIGTERM(t *testing.T) {
	// The default format is JSON, which the demo, soak and tests read
	// with startlines.
	w := &lineWriter{match: `"msg":"listening"`, found: make(chan string, 1)}
	code := make(chan int, 1)
	logPath := t.TempDir() + "/requests.jsonl"
	go func() {
		code <- run([]string{"--listen=127.0.0.1:0", "--model=m", "--ttft-base=0", "--itl-base=0",
			"--ttft-per-seq=0", "--itl-per-seq=0", "--flavor=tgi",
			"--request-log=" + logPath, "--allow-fault-header", "--load-time=1ms"}, io.Discard, w)
	}()
	var line string
	select {
	case line = <-w.found:
	case c := <-code:
		t.Fatalf("run returned %d before listening: %s", c, w.String())
	case <-time.After(failsafe):
		t.Fatal("no listening line")
	}
	var addr string
	if !startlines.EngineAddr(&addr)([]byte(line)) {
		t.Fatalf("startlines cannot read the listening line %q", line)
	}

	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", "req-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"The quick"`) {
		t.Fatalf("status %d body %s err %v", resp.StatusCode, body, err)
	}
	// A fault the flag allows: the body is cut short.
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", "req-2")
	req.Header.Set("X-Enginesim-Fault", "truncate-sse")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		t.Fatalf("a truncated body read to its end (status %d)", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	logged, err := os.ReadFile(logPath) //nolint:gosec // the test's own temporary file.
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"id":"req-1"`) || !strings.Contains(lines[1], `"id":"req-2"`) {
		t.Fatalf("request log = %q, want one line for req-1 and one for req-2", logged)
	}

	// run has registered its signal handler before logging "listening", so
	// this SIGTERM reaches run and not the default handler.
	terminate(t, code, w)
	if !strings.Contains(w.String(), "shutting down") {
		t.Fatalf("log = %s", w.String())
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run(--version) = %d: %s", code, stderr.String())
	}
	if got, want := stdout.String(), version.String("enginesim")+"\n"; got != want {
		t.Fatalf("--version printed %q, want %q", got, want)
	}
}

// TestRunLoadsBeforeListening checks that --load-time keeps the engine from
// listening while it loads, and that SIGTERM during the load ends it at
// once with 0. It logs in --log-format text.
func TestRunLoadsBeforeListening(t *testing.T) {
	w := &lineWriter{match: "msg=\"loading the model\"", found: make(chan string, 1)}
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--listen=127.0.0.1:0", "--load-time=10m", "--log-format=text"}, io.Discard, w)
	}()
	select {
	case <-w.found:
	case c := <-code:
		t.Fatalf("run returned %d before loading: %s", c, w.String())
	case <-time.After(failsafe):
		t.Fatal("no loading line")
	}
	// run has registered its signal handler before logging "loading the
	// model", so this SIGTERM reaches run.
	terminate(t, code, w)
	if out := w.String(); strings.Contains(out, "msg=listening") || !strings.Contains(out, "stopped while loading") {
		t.Fatalf("log = %s, want the load stopped before listening", out)
	}
}

// terminate sends this process SIGTERM and waits for run's exit code on
// code, which must be 0.
func terminate(t *testing.T, code <-chan int, w *lineWriter) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("run returned %d: %s", c, w.String())
		}
	case <-time.After(failsafe):
		t.Fatal("run did not return after SIGTERM")
	}
}
