package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// stalledClients is how many clients TestClientThatStopsReadingReleasesLease
// leaves unread: as many as the member's ceiling, so that the next request
// is admitted only once their leases were released.
const stalledClients = 2

// stalledEventBytes is the size of the events the endless member writes:
// one of them fills the client's small receive buffer and the router's send
// buffer, so the router blocks on the client within the first events and
// never waits for the member, whose goroutine a loaded machine may not run
// for a while.
const stalledEventBytes = 64 << 10

// maxStalledEvents bounds the endless member's stream (64 MiB), far more
// than loopback sockets buffer.
const maxStalledEvents = 1 << 10

// shortStream is the whole reply of the request made after the stalled
// ones.
const shortStream = "data: {\"id\":\"1\"}\n\ndata: [DONE]\n\n"

// rawRequest writes a streamed chat request for llama on a new connection
// to addr whose receive buffer is small, and never reads it; the
// connection is closed when the test ends.
func rawRequest(t *testing.T, addr string) {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: failSafe}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(1 << 10); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"llama","stream":true}`
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
}

// TestClientThatStopsReadingReleasesLease: clients that send a streamed
// request and never read its reply, while the member keeps producing,
// block the router's writes; once no write made progress for the tier's
// idle timeout, each exchange ends as client_gone, its lease is released
// exactly once and its outcome recorded once, and the next request is
// admitted into the freed slots.
func TestClientThatStopsReadingReleasesLease(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	gpu0 := newUpstream(t, "gpu0", nil)
	event := "data: " + strings.Repeat("x", stalledEventBytes-8) + "\n\n"
	gpu0.handle(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if r.Header.Get("X-Test-Short") != "" {
			writeEvents(w, shortStream)
			return
		}
		for range maxStalledEvents {
			if _, err := io.WriteString(w, event); err != nil {
				return
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
		}
	})
	const idle = 500 * time.Millisecond
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: stalledClients}}, timeouts(5*time.Second, idle)))

	addr := f.front.Listener.Addr().String()
	for range stalledClients {
		rawRequest(t, addr)
	}
	for range stalledClients {
		o := f.outcome()
		if o.Result != ResultAdmitted || o.End != EndClientGone || o.Member != "gpu0" {
			t.Fatalf("a client that stopped reading: %+v, want admitted and client_gone", o)
		}
		if o.Duration < idle {
			t.Errorf("the exchange ended after %v, before the idle timeout %v", o.Duration, idle)
		}
	}
	if n := f.releaseCalls("ns/llama", "gpu0"); n != stalledClients {
		t.Fatalf("%d releases for %d stalled exchanges", n, stalledClients)
	}
	f.assertIdle("ns/llama")
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), http.Header{"X-Test-Short": {"1"}})
	if resp.StatusCode != http.StatusOK || string(body) != shortStream {
		t.Fatalf("the request after the stalled ones: %d %q", resp.StatusCode, body)
	}
	if o := f.outcome(); o.End != EndComplete {
		t.Fatalf("the request after the stalled ones: %+v", o)
	}
	select {
	case o := <-f.outcomes:
		t.Fatalf("an extra outcome was recorded: %+v", o)
	default:
	}
	if n := f.releaseCalls("ns/llama", "gpu0"); n != stalledClients+1 {
		t.Fatalf("%d releases for %d exchanges", n, stalledClients+1)
	}
}
