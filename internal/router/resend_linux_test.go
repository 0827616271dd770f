package router

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// okResponse is the raw engines' answer.
const okResponse = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

// cork holds a connection's output until it is closed, so an engine's last
// response and its FIN leave together: no request can reach the engine
// between its last response and its close.
func cork(t *testing.T, c net.Conn) {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Error(err)
		return
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
	}); err != nil || serr != nil {
		t.Error(err, serr)
	}
}

// TestIdleCloseRacesAreResent runs thousands of requests against an engine
// that closes its idle keep-alive connections at random moments: right
// after a response (its FIN then usually reaches the router before the
// connection is reused, and the liveness peek discards it) and in the
// window the peek cannot see, after the router's liveness check and before
// its request goes out (the engine's FIN crosses the request, and the
// engine's kernel resets the request's bytes). No request may fail, and the
// engine must serve each request exactly once.
func TestIdleCloseRacesAreResent(t *testing.T) {
	const (
		clients  = 4
		requests = 600 // per client: 2400 in all, bounded.
	)
	var (
		served atomic.Int64
		mu     sync.Mutex
		rng    = rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a reproducible test schedule, not a secret.
	)
	chance := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n) == 0
	}
	engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if readRequest(br) != nil {
				return
			}
			served.Add(1)
			if chance(8) {
				cork(t, c)
				_, _ = io.WriteString(c, okResponse)
				return // closes the connection behind the response.
			}
			if _, err := io.WriteString(c, okResponse); err != nil {
				return
			}
		}
	})
	var raced atomic.Int64
	f := newFixture(t, fixtureOptions{beforeWrite: func(local net.Addr) {
		if chance(4) && engine.closeConn(local.String()) {
			raced.Add(1)
		}
	}})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}}))

	var (
		wg     sync.WaitGroup
		failed atomic.Int64
	)
	// The recorder's channel holds fewer outcomes than the test makes:
	// take them as they come.
	outcomes := make(chan error, 1)
	go func() {
		var first error
		for range clients * requests {
			select {
			case o := <-f.outcomes:
				if first == nil && (o.End != EndComplete || o.Ejection != "") {
					first = fmt.Errorf("outcome %+v", o)
				}
			case <-time.After(failSafe):
				outcomes <- errors.New("no outcome recorded")
				return
			}
		}
		outcomes <- first
	}()
	for range clients {
		wg.Go(func() {
			for range requests {
				resp, err := f.post(t.Context(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed, want none", n, clients*requests)
	}
	if err := <-outcomes; err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got != clients*requests {
		t.Fatalf("the engine served %d requests, want exactly %d: one each", got, clients*requests)
	}
	if raced.Load() == 0 {
		t.Fatal("no close crossed a request: the test did not reach the resend path")
	}
	if f.ready.RecheckCalls("ns/llama", "gpu0") != 0 {
		t.Fatal("an idle close ejected the member")
	}
	t.Logf("%d closes crossed a request, %d connections", raced.Load(), engine.acceptedConns())
	f.assertIdle("ns/llama")
}

// TestReadThenClosedIsNotResent proves a request the engine read and then
// dropped by closing the connection (FIN, as an engine that dies after
// reading does) is not sent again, even on a reused connection: the client
// gets 502, and the engine saw the request once on the one connection.
func TestReadThenClosedIsNotResent(t *testing.T) {
	var served atomic.Int64
	engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if readRequest(br) != nil {
				return
			}
			if served.Add(1) == 2 {
				return // read the second request, then close.
			}
			if _, err := io.WriteString(c, okResponse); err != nil {
				return
			}
		}
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}}))
	if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	f.outcome()
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
		t.Fatalf("second request: %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
	}
	// The engine took the request and closed without answering: it is
	// rechecked (connection_closed), and the request is not resent.
	if o := f.outcome(); o.End != EndUnavailable || o.Ejection != EjectClosed {
		t.Fatalf("outcome %+v, want upstream_unavailable ejected connection_closed", o)
	}
	if n, conns := served.Load(), engine.acceptedConns(); n != 2 || conns != 1 {
		t.Fatalf("engine served %d requests on %d connections, want 2 on 1: the second must not be resent", n, conns)
	}
	f.assertIdle("ns/llama")
}

// TestResendIsNotRetried proves the resend is made once: when the engine
// closed the reused connection under the request and then stopped
// listening, the fresh connection is refused and the member ejected, and
// nothing is tried a third time on it. The engine never saw the request,
// so it goes back to admission once without the member; the tier has no
// other, and the client gets admission's refusal.
func TestResendIsNotRetried(t *testing.T) {
	var served atomic.Int64
	engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		for readRequest(br) == nil {
			served.Add(1)
			if _, err := io.WriteString(c, okResponse); err != nil {
				return
			}
		}
	})
	var (
		armed atomic.Bool // only the second request's write closes the engine.
		hooks atomic.Int64
	)
	f := newFixture(t, fixtureOptions{beforeWrite: func(local net.Addr) {
		if !armed.Load() {
			return
		}
		hooks.Add(1)
		_ = engine.ln.Close() // the engine goes away: the fresh dial is refused.
		engine.closeConn(local.String())
	}})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}}))
	if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	f.outcome()
	armed.Store(true)
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != "no_eligible_member" {
		t.Fatalf("second request: %d %s, want 503 no_eligible_member", resp.StatusCode, body)
	}
	if o := f.outcome(); o.Result != ResultNotAdmitted || o.NotSentMember != "gpu0" || o.NotSentEjection != EjectRefused {
		t.Fatalf("outcome %+v, want not admitted after gpu0 ejected connection_refused", o)
	}
	if n := f.ready.RecheckCalls("ns/llama", "gpu0"); n != 1 {
		t.Fatalf("Recheck called %d times, want 1", n)
	}
	if hooks.Load() != 1 || served.Load() != 1 || engine.acceptedConns() != 1 {
		t.Fatalf("%d writes on reused connections, engine served %d on %d connections; want 1, 1, 1",
			hooks.Load(), served.Load(), engine.acceptedConns())
	}
	f.assertIdle("ns/llama")
}
