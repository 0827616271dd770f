package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
)

// memberCeiling is each member's maxConcurrency in
// TestRunHandoverKeepsCeilings: low enough that four looping clients and a
// stream per member bind it.
const memberCeiling = 2

// countingEngine is a fake engine that records its largest number of
// requests in flight at once. It answers a chat request at once, except a
// streaming one, which sends a first event, reports on streaming and holds
// the rest until release is closed.
type countingEngine struct {
	srv          *httptest.Server
	mu           sync.Mutex
	now, highest int
}

func newCountingEngine(t *testing.T, release <-chan struct{}, streaming chan<- struct{}) *countingEngine {
	t.Helper()
	e := &countingEngine{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, nil) {
			return
		}
		e.mu.Lock()
		e.now++
		e.highest = max(e.highest, e.now)
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			e.now--
			e.mu.Unlock()
		}()
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		streaming <- struct{}{}
		select {
		case <-release:
			_, _ = io.WriteString(w, "data: 2\n\ndata: [DONE]\n\n")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// max returns the largest number of requests the engine had in flight.
func (e *countingEngine) max() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.highest
}

// capacity returns the tiers' admission counts from the admin API.
func capacity(t *testing.T, admin net.Addr) adminapi.CapacityView {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+admin.String()+"/admin/v1/capacity", nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v adminapi.CapacityView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Tiers) != 1 {
		t.Fatalf("capacity: %v %+v", err, v)
	}
	return v
}

// chatStatus sends one request and returns its status once the body was
// read whole, or the transport error.
func chatStatus(client *http.Client, front, body string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+front+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if body := string(b); strings.Contains(body, `"stream":true`) && !strings.HasSuffix(body, "data: [DONE]\n\n") {
		return 0, fmt.Errorf("stream cut: %q", body)
	}
	return resp.StatusCode, nil
}

// TestRunHandoverKeepsCeilings replaces a router by a second one under
// load with a stream in flight on each member of the first, ceilings of
// two per member: the second router adopts the first's leases, so the
// engines never see more than their ceiling at once during the whole
// overlap; no request fails (503 refusals are counted, not failures); the
// streams finish whole; and once the first router stopped, the second's
// counts return to zero.
func TestRunHandoverKeepsCeilings(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 2)
	engines := []*countingEngine{newCountingEngine(t, release, streaming), newCountingEngine(t, release, streaming)}
	var releaseOnce sync.Once
	releaseStreams := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseStreams) // before the engines close, should the test fail early.
	dir := t.TempDir()
	manifest := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: llama, namespace: ns}
spec:
  nodeName: node-a
  aliases: [llama]
  servedModel: served/model
  members:
  - {id: gpu0, endpoint: %q, maxConcurrency: %d}
  - {id: gpu1, endpoint: %q, maxConcurrency: %d}
`, engines[0].srv.URL, memberCeiling, engines[1].srv.URL, memberCeiling)
	if err := os.WriteFile(filepath.Join(dir, "tiers.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(listen, admin string) []string {
		return []string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", listen, "--admin-listen", admin,
			"--shutdown-grace", "1s", "--shutdown-timeout", "10s"}
	}
	first := launch(t, args("127.0.0.1:0", "127.0.0.1:0")...)
	front, admin := first.started.front.String(), first.started.admin.String()

	// A stream in flight on each member of the first router.
	streamDone := make(chan error, 2)
	for range 2 {
		go func() {
			status, err := chatStatus(&http.Client{Transport: &http.Transport{}}, front, `{"model":"llama","stream":true}`)
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("stream status %d", status)
			}
			streamDone <- err
		}()
		select {
		case <-streaming:
		case <-time.After(failSafe):
			t.Fatal("a stream did not start")
		}
	}

	stop := make(chan struct{})
	progress := make(chan struct{}, handoverClients*handoverStep)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	sent, refused := 0, 0
	for range handoverClients {
		wg.Go(func() {
			transport := &http.Transport{}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			for range maxClientRequests {
				select {
				case <-stop:
					return
				default:
				}
				status, err := chatStatus(client, front, `{"model":"llama"}`)
				mu.Lock()
				sent++
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case status == http.StatusServiceUnavailable:
					refused++
				case status != http.StatusOK:
					failures = append(failures, fmt.Sprintf("status %d", status))
				}
				mu.Unlock()
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	stopLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopLoad()
	underLoad := func(what string) {
		t.Helper()
		for range handoverStep {
			select {
			case <-progress:
			case <-time.After(failSafe):
				t.Fatalf("the load stalled %s", what)
			}
		}
	}

	underLoad("before the second router")
	second := launch(t, args(front, admin)...)
	// The adoption runs after the second router listens; requests pass it
	// once the predecessor's leases are adopted.
	select {
	case <-second.started.opened:
	case <-time.After(failSafe):
		t.Fatal("the second router did not adopt the first's leases")
	}
	underLoad("with both routers")
	// The streams are the first router's; the second counts them as its own.
	if got := capacity(t, second.started.admin).Tiers[0].Active; got < 2 {
		t.Fatalf("the second router counts %d leases with two streams in flight on the first, want at least 2", got)
	}
	first.cancel()
	<-first.started.notReady
	underLoad("while the first router drains")
	releaseStreams()
	for range 2 {
		if err := <-streamDone; err != nil {
			t.Fatalf("a stream in flight at the handover: %v", err)
		}
	}
	first.stopped(t)
	underLoad("after the first router stopped")
	stopLoad()

	mu.Lock()
	if len(failures) != 0 {
		t.Errorf("%d of %d requests failed; first: %s", len(failures), sent, failures[0])
	}
	t.Logf("%d requests, %d refused for capacity, none failed", sent, refused)
	mu.Unlock()
	for i, e := range engines {
		if got := e.max(); got > memberCeiling {
			t.Errorf("engine gpu%d saw %d requests at once, over its ceiling of %d", i, got, memberCeiling)
		}
	}
	if v := capacity(t, second.started.admin); v.Tiers[0].Active != 0 {
		t.Errorf("the second router holds %d leases once the load stopped and the first router stopped: %+v", v.Tiers[0].Active, v.Tiers[0])
	}
	second.cancel()
	second.stopped(t)
}

// TestSuccessionGate holds inference requests until the adoption opened
// the gate, lets GET /v1/models through at once, and ends a held request
// whose client went away.
func TestSuccessionGate(t *testing.T) {
	served := make(chan string, 4)
	s := newSuccession(nil, nil, nil, nil)
	h := s.handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { served <- r.URL.Path }), new(atomic.Bool))
	serve := func(ctx context.Context, path string) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, nil)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
		return done
	}
	<-serve(context.Background(), "/v1/models")
	if got := <-served; got != "/v1/models" {
		t.Fatalf("served %q, want /v1/models at once", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := serve(ctx, "/v1/chat/completions")
	held := serve(context.Background(), "/v1/chat/completions")
	select {
	case got := <-served:
		t.Fatalf("%s served before the gate opened", got)
	default:
	}
	cancel()
	<-gone
	s.open()
	<-held
	if got := <-served; got != "/v1/chat/completions" {
		t.Fatalf("served %q after the gate opened", got)
	}
	select {
	case <-served:
		t.Fatal("the request whose client went away was served")
	default:
	}
}

// TestForwardHopLimit refuses a request that was forwarded
// maxForwardHops times already, instead of forwarding it again.
func TestForwardHopLimit(t *testing.T) {
	s := newSuccession(nil, nil, nil, nil)
	s.forwarding.Store(true)
	h := s.handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served locally while forwarding") }), new(atomic.Bool))
	r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set(hopsHeader, fmt.Sprint(maxForwardHops))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"code":"router_handover"`) {
		t.Fatalf("status %d body %q, want 503 router_handover", w.Code, w.Body.String())
	}
}

func TestLoopbackTarget(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"[::]:8080", "127.0.0.1:8080"},
		{"0.0.0.0:8080", "127.0.0.1:8080"},
		{":8080", "127.0.0.1:8080"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"10.0.0.7:8080", "10.0.0.7:8080"},
	} {
		if got := loopbackTarget(tt.addr); got != tt.want {
			t.Errorf("loopbackTarget(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
