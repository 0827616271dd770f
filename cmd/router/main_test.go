package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/version"
)

// failSafe bounds every wait on an event; it is a deadline for a broken
// test, never the way a test waits.
const failSafe = 20 * time.Second

func TestParseFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	c, err := parseFlags([]string{"--tiers-dir", "d", "--node-name", "n", "--member-idle-timeout", "2s"}, io.Discard)
	if err != nil || c.memberIdleTimeout != 2*time.Second {
		t.Errorf("--member-idle-timeout 2s: %v, %v", c.memberIdleTimeout, err)
	}
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--tiers-dir", "d", "--node-name", "n"}},
		{args: []string{"--node-name", "n"}}, // kube mode
		{args: []string{"--tiers-dir", "d"}, wantErr: "--node-name"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-body-bytes", "0"}, wantErr: "--max-body-bytes"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-buffered-body-bytes", "33554432"}, wantErr: "--max-buffered-body-bytes"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--enable-pprof"}, wantErr: "--enable-pprof needs --admin-token-file"},
		{args: []string{"--node-name", "n", "--strict-manifests"}, wantErr: "--strict-manifests needs --tiers-dir"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-body-bytes", "100", "--max-buffered-body-bytes", "201"}, wantErr: "--max-buffered-body-bytes"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--decision-log-size", "-1"}, wantErr: "--decision-log-size"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--shutdown-timeout", "0s"}, wantErr: "--shutdown-timeout"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--tiers-poll-interval", "1ms"}, wantErr: "--tiers-poll-interval"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--shutdown-grace", "-1s"}, wantErr: "--shutdown-grace"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--shutdown-grace", "2m"}, wantErr: "--shutdown-grace"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--body-read-timeout", "0s"}, wantErr: "--body-read-timeout"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--keys-poll-interval", "1ms"}, wantErr: "--keys-poll-interval"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--keys-poll-interval", "1h"}, wantErr: "--keys-poll-interval"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--member-idle-timeout", "1ms"}, wantErr: "-member-idle-timeout: not a duration"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "extra"}, wantErr: "unexpected arguments"},
		{args: []string{"--bogus"}, wantErr: "flag provided but not defined"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--log-level", "LOUD"}, wantErr: "log-level"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-connections", "0"}, wantErr: "--max-connections"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-connections", "2000000"}, wantErr: "--max-connections"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-unauthenticated-connections", "0"}, wantErr: "--max-unauthenticated-connections"},
		{args: []string{"--tiers-dir", "d", "--node-name", "n", "--max-connections", "8", "--max-unauthenticated-connections", "9"}, wantErr: "--max-unauthenticated-connections"},
	} {
		var out bytes.Buffer
		c, err := parseFlags(tt.args, &out)
		if tt.wantErr == "" {
			if err != nil || c.maxBodyBytes != 16<<20 || c.maxBufferedBodies != 64<<20 || c.decisionLogSize != 4096 ||
				c.shutdownGrace != 5*time.Second || c.bodyReadTimeout != time.Minute || c.keysPoll != 5*time.Second ||
				c.memberIdleTimeout != router.DefaultMemberIdleTimeout || c.maxConns != 4096 || c.maxUnauthConns != 1024 {
				t.Errorf("%v: %+v, %v", tt.args, c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
	// The listeners default to loopback in files mode and to every address
	// in kube mode; explicit addresses win in both.
	for _, tt := range []struct {
		args          []string
		listen, admin string
	}{
		{[]string{"--tiers-dir", "d", "--node-name", "n"}, "127.0.0.1:8080", "127.0.0.1:9090"},
		{[]string{"--node-name", "n"}, ":8080", ":9090"},
		{[]string{"--tiers-dir", "d", "--node-name", "n", "--listen", ":8081"}, ":8081", "127.0.0.1:9090"},
		{[]string{"--node-name", "n", "--admin-listen", "127.0.0.1:9091"}, ":8080", "127.0.0.1:9091"},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil || c.listen != tt.listen || c.adminListen != tt.admin {
			t.Errorf("%v: listen %q, admin %q, %v; want %q, %q", tt.args, c.listen, c.adminListen, err, tt.listen, tt.admin)
		}
	}
	t.Setenv("NODE_NAME", "from-env")
	if c, err := parseFlags([]string{"--tiers-dir", "d"}, io.Discard); err != nil || c.nodeName != "from-env" {
		t.Errorf("NODE_NAME: %+v, %v", c, err)
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// TestParseFlagsTenantHeader: --tenant-header is off by default, takes a
// header name in any case and keeps its canonical form, and refuses at
// start, naming the flag, a name that is not a header name or a header
// that carries credentials.
func TestParseFlagsTenantHeader(t *testing.T) {
	base := []string{"--tiers-dir", "d", "--node-name", "n"}
	if c, err := parseFlags(base, io.Discard); err != nil || c.tenantHeader != "" {
		t.Fatalf("default: %q, %v; want off", c.tenantHeader, err)
	}
	c, err := parseFlags(append(base, "--tenant-header", "x-gateway-inference-fairness-id"), io.Discard)
	if err != nil || c.tenantHeader != "X-Gateway-Inference-Fairness-Id" {
		t.Fatalf("the GIE header: %q, %v", c.tenantHeader, err)
	}
	for _, name := range []string{"x tenant", "x-tenant:", "Authorization", "connection"} {
		_, err := parseFlags(append(base, "--tenant-header", name), io.Discard)
		if !errors.Is(err, router.ErrTenantHeader) || !strings.HasPrefix(err.Error(), "--tenant-header: ") {
			t.Errorf("--tenant-header %q: %v, want an error naming the flag", name, err)
		}
	}
}

// postChat posts body to the front door at front's chat completions route
// with the tests' key, on a client of its own, and returns the response;
// the caller closes its body.
func postChat(t *testing.T, front net.Addr, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+front.String()+"/v1/chat/completions",
		strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// servedModelList answers a fake engine's readiness probe: GET /v1/models
// listing served/model, signalling probed (when set) without blocking. It
// reports whether r was the probe.
func servedModelList(w http.ResponseWriter, r *http.Request, probed chan<- struct{}) bool {
	if r.URL.Path != "/v1/models" {
		return false
	}
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"served/model","object":"model"}]}`)
	if probed != nil {
		select {
		case probed <- struct{}{}:
		default:
		}
	}
	return true
}

// engine is a fake engine serving its model list and holding streams until
// finish is closed. probed is signalled (without blocking) on every
// readiness probe: once one arrived, the member's prober runs and ProbeNow
// works.
func engine(t *testing.T, finish, arrived, probed chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, probed) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		select {
		case <-finish:
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRouter runs the command on loopback ports and returns what it
// started, the channel run's result arrives on and the cancel standing in
// for SIGTERM.
func startRouter(t *testing.T, endpoint string, extra ...string) (startedRouter, chan error, context.CancelFunc, *syncBuffer) {
	t.Helper()
	dir, keys := writeConfig(t, endpoint)
	args := append([]string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--api-keys-file", keys, "--shutdown-grace", "0s"}, extra...)
	p := launch(t, args...)
	return p.started, p.result, p.cancel, p.logs
}

// writeConfig writes a tiers directory with one tier of one member at
// endpoint, and a key file holding the key "secret".
func writeConfig(t *testing.T, endpoint string) (dir, keys string) {
	t.Helper()
	return writeTier(t, fmt.Sprintf(`  members:
  - {id: gpu0, endpoint: %q, maxConcurrency: 4}
`, endpoint))
}

// writeTier writes, into a fresh directory, the tier ns/llama of node-a
// (alias llama, served model served/model) with the spec lines after
// servedModel, and a key file holding the key "secret".
func writeTier(t *testing.T, spec string) (dir, keys string) {
	t.Helper()
	dir = t.TempDir()
	manifest := `apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: llama, namespace: ns}
spec:
  nodeName: node-a
  aliases: [llama]
  servedModel: served/model
` + spec
	if err := os.WriteFile(filepath.Join(dir, "tiers.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	keys = filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, keys
}

// waitReady waits until the member's prober runs, then forces a probe and
// waits for its published result.
func waitReady(t *testing.T, s startedRouter, probed chan struct{}) {
	t.Helper()
	select {
	case <-probed:
	case <-time.After(failSafe):
		t.Fatal("no readiness probe reached the engine")
	}
	ctx, stop := context.WithTimeout(context.Background(), failSafe)
	defer stop()
	if ready, err := s.probes.ProbeNow(ctx, "ns/llama", "gpu0"); err != nil || !ready {
		t.Fatalf("probe: %v %v", ready, err)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestRunServesAndDrainsOnShutdown starts the command, proxies a stream
// through it, then shuts down while the stream is in flight: readiness
// fails at once, the stream finishes whole, and run returns.
func TestRunServesAndDrainsOnShutdown(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	up := engine(t, finish, arrived, probed)
	s, result, cancel, logs := startRouter(t, up.URL)
	defer cancel()

	if status := get(t, "http://"+s.admin.String()+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz = %d after the first snapshot", status)
	}
	waitReady(t, s, probed)
	resp := postChat(t, s.front, `{"model":"llama","stream":true}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Sluice-Member") != "gpu0" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	<-arrived

	cancel() // SIGTERM.
	// The admin listener keeps answering while the front door drains, and
	// reports not ready.
	<-s.notReady
	if status := get(t, "http://"+s.admin.String()+"/readyz"); status != http.StatusServiceUnavailable {
		t.Fatalf("readyz = %d while shutting down, want 503", status)
	}
	select {
	case err := <-result:
		t.Fatalf("run returned %v with a stream in flight", err)
	default:
	}
	close(finish)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(body) != "data: 1\n\ndata: [DONE]\n\n" {
		t.Fatalf("the in-flight stream was disturbed: %q, %v", body, err)
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return after the last stream")
	}
	for _, secret := range []string{"secret", up.URL} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs contain %q", secret)
		}
	}
}

// TestRunShutdownTimeout proves a stream that outlives --shutdown-timeout is
// closed and run returns.
func TestRunShutdownTimeout(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, result, cancel, _ := startRouter(t, up.URL, "--shutdown-timeout", "100ms")
	defer cancel()
	waitReady(t, s, probed)
	resp := postChat(t, s.front, `{"model":"llama"}`)
	defer func() { _ = resp.Body.Close() }()
	<-arrived
	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return after the shutdown timeout")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the stream ended cleanly; want it closed by the shutdown")
	}
}

func TestRunFailsFast(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--tiers-dir", filepath.Join(t.TempDir(), "missing"), "--node-name", "n", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, "manifest directory unreadable"},
		{[]string{"--tiers-dir", t.TempDir(), "--node-name", "n", "--api-keys-file", filepath.Join(t.TempDir(), "none")}, "invalid key file"},
		{[]string{"--tiers-dir", t.TempDir(), "--node-name", "n", "--listen", "256.0.0.1:1", "--admin-listen", "127.0.0.1:0"}, "front door listener"},
		{[]string{"--tiers-dir", t.TempDir(), "--node-name", "n", "--admin-listen", "256.0.0.1:1"}, "admin listener"},
	} {
		err := run(context.Background(), context.Background(), tt.args, io.Discard, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.wantErr)
			continue
		}
		// Each part names itself once: no "source: source: ...".
		if first, rest, _ := strings.Cut(err.Error(), ": "); strings.HasPrefix(rest, first+": ") {
			t.Errorf("%v: err = %v names its part twice", tt.args, err)
		}
	}
}

// TestVersion: --version prints the build's version line and starts
// nothing, even without the otherwise required --node-name.
func TestVersion(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	var out strings.Builder
	if err := run(context.Background(), context.Background(), []string{"--version"}, &out, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String("router")+"\n"; got != want {
		t.Fatalf("--version printed %q, want %q", got, want)
	}
}

// TestParseFlagsLogLevel: --log-level takes the four levels in any case
// (the router's uppercase spelling included), and the command line's
// errors, a bad level among them, are usage errors (exit status 2).
func TestParseFlagsLogLevel(t *testing.T) {
	base := []string{"--tiers-dir", "d", "--node-name", "n"}
	for in, want := range map[string]slog.Level{"DEBUG": slog.LevelDebug, "debug": slog.LevelDebug, "Warn": slog.LevelWarn, "error": slog.LevelError} {
		if c, err := parseFlags(append(base, "--log-level", in), io.Discard); err != nil || c.logging.Level != want {
			t.Errorf("--log-level %s: %v, %v; want %v", in, c.logging.Level, err, want)
		}
	}
	for in, want := range map[string]string{"": cmdline.LogJSON, "text": cmdline.LogText, "JSON": cmdline.LogJSON} {
		args := base
		if in != "" {
			args = append(args[:len(args):len(args)], "--log-format", in)
		}
		if c, err := parseFlags(args, io.Discard); err != nil || c.logging.Format != want {
			t.Errorf("--log-format %q: %q, %v; want %q", in, c.logging.Format, err, want)
		}
	}
	for _, args := range [][]string{append(base, "--log-level", "loud"), append(base, "--log-format", "logfmt"), append(base, "--no-such-flag"), {"--tiers-dir", "d"}} {
		t.Setenv("NODE_NAME", "")
		err := run(context.Background(), context.Background(), args, io.Discard, io.Discard, nil)
		if !errors.Is(err, cmdline.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
