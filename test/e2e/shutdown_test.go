package e2e

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// dialTimeout bounds one connection attempt to the draining router.
const dialTimeout = time.Second

// TestRouterSIGTERMDrainsStreams sends SIGTERM to the router while streams
// are in flight: new connections must be refused and /readyz must fail
// while the streams are still running, then every stream must complete
// whole (all its tokens and [DONE]) and the router must exit with status 0.
func TestRouterSIGTERMDrainsStreams(t *testing.T) {
	const alias, streams, tokens = "e2e-drain", 4, 150
	// 150 tokens at 20 ms each: each stream lasts about 3 s.
	e := startEngine(t, "engine", "--itl-base", "20ms")
	tr := tier{name: "drain", alias: alias, members: []member{{"solo", e, 8}}}
	r := startRouter(t, tr)

	var open []*chatStream
	for range streams {
		open = append(open, openChatStream(t, r.baseURL(), alias, tokens))
	}
	r.awaitActive(t, tr.key(), streams)

	if err := r.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "front door refusing connections", func() (bool, string) {
		d := net.Dialer{Timeout: dialTimeout}
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		defer cancel()
		conn, err := d.DialContext(ctx, "tcp", r.front)
		if err != nil {
			return true, ""
		}
		_ = conn.Close()
		return false, "a new connection was accepted"
	})
	// The refusal happened while the streams were still running: the
	// engine is still serving all of them.
	if s := e.stats(t); s.InFlight != streams {
		t.Fatalf("engine has %d streams in flight after the front door closed, want %d (streams too short for the test?)", s.InFlight, streams)
	}
	eventually(t, "/readyz failing", func() (bool, string) {
		resp, err := getStatus("http://" + r.admin + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		return resp != http.StatusOK, "still ready"
	})

	for i, s := range open {
		got, done, err := s.finish()
		if err != nil || !done || got != tokens {
			t.Fatalf("stream %d: %d tokens, done %v, err %v; want all %d and [DONE]", i, got, done, err, tokens)
		}
	}
	if err := awaitExit(t, r.Process); exitCode(err) != 0 {
		t.Fatalf("router exited with %v:\n%s", err, r.Tail())
	}
}

// getStatus GETs url and returns the response status.
func getStatus(url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
