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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
)

// Bounds of TestRunHandover's load.
const (
	// handoverClients is how many keep-alive clients send requests in a
	// loop, one at a time each: enough to have connections on both routers
	// at every step, few enough for a shared 2-core machine.
	handoverClients = 4
	// maxClientRequests bounds each client's loop; the test stops the
	// loops long before on any machine that passes it.
	maxClientRequests = 50_000
	// handoverStep is how many successful requests the test waits for
	// between two steps, so that every step happens under load.
	handoverStep = 100
)

// fastEngine is a fake engine answering each chat request at once, except
// a streaming one, which sends a first event and holds the rest until
// release is closed.
func fastEngine(t *testing.T, release <-chan struct{}, streaming chan<- struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, nil) {
			return
		}
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
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// routerProcess is one run of the command.
type routerProcess struct {
	started startedRouter
	result  chan error
	cancel  context.CancelFunc // SIGTERM.
	hurry   context.CancelFunc // a second SIGTERM.
	logs    *syncBuffer
}

// launch runs the command with args and waits until it started.
func launch(t *testing.T, args ...string) routerProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hurry, hurryUp := context.WithCancel(context.Background())
	t.Cleanup(hurryUp)
	p := routerProcess{result: make(chan error, 1), cancel: cancel, hurry: hurryUp, logs: &syncBuffer{}}
	started := make(chan startedRouter, 1)
	go func() { p.result <- run(ctx, hurry, args, io.Discard, p.logs, func(s startedRouter) { started <- s }) }()
	t.Cleanup(cancel)
	select {
	case p.started = <-started:
	case err := <-p.result:
		t.Fatalf("run returned %v before starting; logs: %s", err, p.logs)
	case <-time.After(failSafe):
		t.Fatal("the router did not start")
	}
	return p
}

// stopped waits for run to return and fails unless it returned nil.
func (p routerProcess) stopped(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.result:
		if err != nil {
			t.Fatalf("run = %v; logs: %s", err, p.logs)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return")
	}
}

// quiesceIntent returns each tier's quiesce intent from the admin API.
func quiesceIntent(t *testing.T, admin net.Addr) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+admin.String()+"/admin/v1/tiers", nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v adminapi.TiersView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || !v.Loaded {
		t.Fatalf("tiers: %v %+v", err, v)
	}
	var b strings.Builder
	for _, tier := range v.Tiers {
		q, _ := json.Marshal(tier.Quiesce)
		fmt.Fprintf(&b, "%s %s\n", tier.Tier, q)
	}
	return b.String()
}

// chat sends one request and returns an error unless it succeeded whole.
func chat(client *http.Client, front, body string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+front+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return nil
}

// rolloutArgs are the flags of a router that a second one replaces in the
// rollout tests: the files source in dir, the key file keys, the front door
// and admin addresses, a 2 s hand-over grace.
func rolloutArgs(dir, keys, listen, admin string) []string {
	return []string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", listen, "--admin-listen", admin,
		"--api-keys-file", keys, "--shutdown-grace", "2s", "--shutdown-timeout", "10s"}
}

// TestRunHandover replaces a router by a second one on the same ports
// under load, as the DaemonSet's surge rollout does: the second starts
// while the first serves, then the first gets SIGTERM and drains. No
// request fails, a stream in flight at SIGTERM finishes whole, and both
// serve the same quiesce intent.
func TestRunHandover(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 1)
	up := fastEngine(t, release, streaming)
	dir, keys := writeTier(t, fmt.Sprintf(`  members:
  - {id: gpu0, endpoint: %[1]q, maxConcurrency: 64}
  - {id: gpu1, endpoint: %[1]q, maxConcurrency: 64}
  quiesce:
    members: {gpu1: maintenance}
`, up.URL))
	args := func(listen, admin string) []string { return rolloutArgs(dir, keys, listen, admin) }
	first := launch(t, args("127.0.0.1:0", "127.0.0.1:0")...)
	front, admin := first.started.front.String(), first.started.admin.String()
	intent := quiesceIntent(t, first.started.admin)
	// Profiles are off without --enable-pprof, even on an open admin API.
	pprofReq, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+admin+"/debug/pprof/", nil)
	pprofResp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(pprofReq)
	if err != nil {
		t.Fatal(err)
	}
	_ = pprofResp.Body.Close()
	if pprofResp.StatusCode != http.StatusNotFound {
		t.Fatalf("pprof without --enable-pprof = %d, want 404", pprofResp.StatusCode)
	}

	// A stream in flight on the first router when it gets SIGTERM.
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- chat(&http.Client{Transport: &http.Transport{}}, front, `{"model":"llama","stream":true}`)
	}()
	select {
	case <-streaming:
	case <-time.After(failSafe):
		t.Fatal("the stream did not start")
	}

	// The load: keep-alive clients, each with its own connection pool.
	stop := make(chan struct{})
	progress := make(chan struct{}, handoverClients*handoverStep)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	sent := 0
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
				err := chat(client, front, `{"model":"llama"}`)
				mu.Lock()
				sent++
				if err != nil {
					failures = append(failures, err.Error())
				}
				mu.Unlock()
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
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
	if second.started.front.String() != front || second.started.admin.String() != admin {
		t.Fatalf("the second router listens on %v and %v, want %s and %s", second.started.front, second.started.admin, front, admin)
	}
	underLoad("with both routers")
	first.cancel()
	<-first.started.notReady
	underLoad("while the first router drains")
	close(release)
	if err := <-streamDone; err != nil {
		t.Fatalf("the stream in flight at SIGTERM: %v", err)
	}
	first.stopped(t)
	underLoad("after the first router stopped")
	if got := quiesceIntent(t, second.started.admin); got != intent {
		t.Errorf("quiesce intent: first router %q, second %q", intent, got)
	}

	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close.
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != 0 {
		t.Fatalf("%d of %d requests failed during the handover; first: %s", len(failures), sent, failures[0])
	}
	t.Logf("%d requests, none failed", sent)
	second.cancel()
	second.stopped(t)
}

// TestRunGraceTellsClientsToReconnect: after SIGTERM the router fails
// /readyz but keeps serving for --shutdown-grace, new connections
// included, and every response tells the client to close its connection.
func TestRunGraceTellsClientsToReconnect(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	up := fastEngine(t, release, streaming)
	s, result, cancel, _ := startRouter(t, up.URL, "--shutdown-grace", "1s")
	client := &http.Client{Transport: &http.Transport{}}
	// do sends one request and returns its status and whether the response
	// asked to close the connection.
	do := func(client *http.Client) (int, bool) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+s.front.String()+"/v1/chat/completions",
			strings.NewReader(`{"model":"llama"}`))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Close
	}
	if status, closing := do(client); status != http.StatusOK || closing {
		t.Fatalf("before SIGTERM: %d close=%v", status, closing)
	}
	cancel()
	<-s.notReady
	if status := get(t, "http://"+s.admin.String()+"/readyz"); status != http.StatusServiceUnavailable {
		t.Fatalf("readyz = %d during the grace, want 503", status)
	}
	for name, c := range map[string]*http.Client{"kept-alive": client, "new": {Transport: &http.Transport{}}} {
		if status, closing := do(c); status != http.StatusOK || !closing {
			t.Errorf("%s connection during the grace: %d close=%v, want 200 with Connection: close", name, status, closing)
		}
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return after the grace")
	}
}

// TestRunNotReadyUntilFrontDoorListens: the admin listener opens first and
// its /readyz fails until the front door listens, which waits for a first
// probe of every member.
func TestRunNotReadyUntilFrontDoorListens(t *testing.T) {
	probing, letProbe := make(chan struct{}, 1), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case probing <- struct{}{}:
		default:
		}
		select {
		case <-letProbe:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"served/model","object":"model"}]}`)
	}))
	defer up.Close()
	// Hold an admin port the router joins (and, being newer, takes over),
	// so that the test knows it before the router started. The router
	// shares a port only with its predecessor: the test plays one, holding
	// the handover channel of the router's front door address (and
	// closing every connection to it, so that nothing is adopted).
	placeholder, err := listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = placeholder.Close() }()
	front := freeAddress(t)
	holdHandoverName(t, front, func(net.Conn) {})
	dir, keys := writeConfig(t, up.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, result := make(chan startedRouter, 1), make(chan error, 1)
	go func() {
		result <- run(ctx, context.Background(), []string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", front,
			"--admin-listen", placeholder.Addr().String(), "--api-keys-file", keys, "--shutdown-grace", "0s"},
			io.Discard, io.Discard, func(s startedRouter) { started <- s })
	}()
	select {
	case <-probing:
	case err := <-result:
		t.Fatalf("run = %v", err)
	case <-time.After(failSafe):
		t.Fatal("no probe reached the engine")
	}
	readyz := "http://" + placeholder.Addr().String() + "/readyz"
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, readyz, nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "front door not listening yet\n" {
		t.Fatalf("readyz while the first probe runs: %d %q", resp.StatusCode, body)
	}
	select {
	case <-started:
		t.Fatal("the front door opened before the first probe ended")
	default:
	}
	close(letProbe)
	select {
	case s := <-started:
		if status := get(t, readyz); status != http.StatusOK {
			t.Fatalf("readyz = %d once the front door listens", status)
		}
		if s.admin.String() != placeholder.Addr().String() {
			t.Fatalf("admin listens on %v", s.admin)
		}
	case <-time.After(failSafe):
		t.Fatal("the front door did not open")
	}
	cancel()
	if err := <-result; err != nil {
		t.Fatalf("run = %v", err)
	}
}

// TestRunReloadsKeys: a rotated key file is served without a restart; the
// log names the file and the count, never a key.
func TestRunReloadsKeys(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	up := fastEngine(t, release, streaming)
	dir, keys := writeConfig(t, up.URL)
	p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--api-keys-file", keys, "--admin-token-file", keys, "--shutdown-grace", "0s", "--keys-poll-interval", "100ms")
	tmp := keys + ".new"
	if err := os.WriteFile(tmp, []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, keys); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the API keys and the admin token, read from the same file.
		select {
		case r := <-p.started.keyReloads:
			if r.Err != nil || r.Keys != 1 || r.Path != keys {
				t.Fatalf("reload report %+v", r)
			}
		case <-time.After(failSafe):
			t.Fatal("the rotated file was not reloaded")
		}
	}
	status := func(url, key string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	models, capacity := "http://"+p.started.front.String()+"/v1/models", "http://"+p.started.admin.String()+"/admin/v1/capacity"
	for _, url := range []string{models, capacity} {
		if status(url, "rotated") != http.StatusOK || status(url, "secret") != http.StatusUnauthorized {
			t.Errorf("%s: the rotated key is not the one in force", url)
		}
	}
	p.cancel()
	p.stopped(t)
	if logs := p.logs.String(); !strings.Contains(logs, "key file reloaded") || strings.Contains(logs, "rotated\\n") ||
		strings.Contains(logs, `"rotated"`) {
		t.Errorf("logs: %s", logs)
	}
}

// freeAddress returns a loopback address whose port was free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// holdHandoverName holds the handover channel of front in this process
// (the router's uid) and gives each connection to serve, until the test
// ends.
func holdHandoverName(t *testing.T, front string, serve func(net.Conn)) {
	t.Helper()
	ln, err := listenHandover(handoverName(front))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				serve(conn)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
}
