package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/telemetry"
)

// pipeConn is one end of a net.Pipe whose other end the test holds, to
// see whether connLimits closed it.
type pipeConn struct {
	srv, peer net.Conn
	tc        *trackedConn // nil when refused.
}

// closed reports whether the server end was closed: the peer's read ends.
func (p *pipeConn) closed(t *testing.T) bool {
	t.Helper()
	if err := p.peer.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		return errors.Is(err, io.ErrClosedPipe) // a pipe refuses deadlines once either end closed.
	}
	_, err := p.peer.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

// authenticate runs the router's callback on a request of p's connection.
func authenticate(l *connLimits, p *pipeConn) {
	r := httptest.NewRequestWithContext(l.connContext(context.Background(), p.tc), http.MethodGet, "/v1/models", nil)
	l.authenticated(r)
}

// TestConnLimits drives the limits step by step: a new connection over
// the unauthenticated bound closes the oldest unauthenticated one; over
// the total bound it closes the oldest unauthenticated one too, or itself
// when every other is authenticated; an authenticated connection is never
// closed by them; an unauthenticated connection going idle is closed; a
// closed connection frees its slot.
func TestConnLimits(t *testing.T) {
	l := newConnLimits(4, 2)
	conns := map[string]*pipeConn{}
	open := func(name string) *pipeConn {
		srv, peer := net.Pipe()
		t.Cleanup(func() { _ = srv.Close(); _ = peer.Close() })
		p := &pipeConn{srv: srv, peer: peer, tc: l.admit(srv)}
		conns[name] = p
		return p
	}
	wantClosed := func(step string, names ...string) {
		t.Helper()
		closed := map[string]bool{}
		for _, n := range names {
			closed[n] = true
		}
		for n, p := range conns {
			if got := p.closed(t); got != closed[n] {
				t.Errorf("%s: %s closed = %v, want %v", step, n, got, closed[n])
			}
		}
	}
	wantCounts := func(step string, want telemetry.ConnectionCounts) {
		t.Helper()
		if got := l.counts(); got != want {
			t.Errorf("%s: counts %+v, want %+v", step, got, want)
		}
	}

	open("u1")
	open("u2")
	wantCounts("two unauthenticated", telemetry.ConnectionCounts{Open: 2, Unauthenticated: 2})
	open("u3")
	wantClosed("a third unauthenticated connection", "u1")
	wantCounts("a third unauthenticated connection", telemetry.ConnectionCounts{Open: 2, Unauthenticated: 2, ClosedEvicted: 1})

	authenticate(l, open("a1")) // evicts u2 as it arrives, then authenticates.
	authenticate(l, open("a2"))
	authenticate(l, conns["a2"]) // a second request changes nothing.
	wantClosed("two authenticated", "u1", "u2")
	wantCounts("two authenticated", telemetry.ConnectionCounts{Open: 3, Unauthenticated: 1, ClosedEvicted: 2})

	authenticate(l, open("a3"))
	wantCounts("four open", telemetry.ConnectionCounts{Open: 4, Unauthenticated: 1, ClosedEvicted: 2})
	authenticate(l, open("a4")) // over the total: u3 goes.
	wantClosed("over the total", "u1", "u2", "u3")
	wantCounts("over the total", telemetry.ConnectionCounts{Open: 4, ClosedEvicted: 3})

	if p := open("x"); p.tc != nil || !p.closed(t) {
		t.Fatal("a connection over the total with every slot authenticated was not closed at once")
	}
	delete(conns, "x")
	wantCounts("refused", telemetry.ConnectionCounts{Open: 4, ClosedEvicted: 3, ClosedOverLimit: 1})

	// Closing frees a slot; an authenticated connection going idle stays.
	l.connState(conns["a4"].tc, http.StateIdle)
	l.connState(conns["a1"].tc, http.StateClosed)
	l.connState(conns["a1"].tc, http.StateClosed) // twice changes nothing.
	wantCounts("a1 closed", telemetry.ConnectionCounts{Open: 3, ClosedEvicted: 3, ClosedOverLimit: 1})
	u4 := open("u4")
	wantCounts("u4", telemetry.ConnectionCounts{Open: 4, Unauthenticated: 1, ClosedEvicted: 3, ClosedOverLimit: 1})
	// An unauthenticated connection that went idle is closed; net/http
	// then reports it closed.
	l.connState(u4.tc, http.StateActive)
	if u4.closed(t) {
		t.Fatal("an active unauthenticated connection was closed")
	}
	l.connState(u4.tc, http.StateIdle)
	if !u4.closed(t) {
		t.Fatal("an idle unauthenticated connection stayed open")
	}
	l.connState(u4.tc, http.StateClosed)
	wantCounts("u4 closed", telemetry.ConnectionCounts{Open: 3, ClosedEvicted: 3, ClosedOverLimit: 1})
	// An evicted connection's close does not count twice.
	l.connState(conns["u1"].tc, http.StateClosed)
	wantCounts("u1 reported closed", telemetry.ConnectionCounts{Open: 3, ClosedEvicted: 3, ClosedOverLimit: 1})
}

// connLimitsWorkers and connLimitsRounds size TestConnLimitsConcurrent.
const (
	connLimitsWorkers = 8
	connLimitsRounds  = 200
)

// TestConnLimitsConcurrent: connections admitted, authenticated and
// closed from many goroutines at once (under -race) never exceed the
// bounds, and once every one is closed nothing is counted open.
func TestConnLimitsConcurrent(t *testing.T) {
	const maxConns, maxUnauth = 16, 4
	l := newConnLimits(maxConns, maxUnauth)
	var wg sync.WaitGroup
	for w := range connLimitsWorkers {
		wg.Go(func() {
			for i := range connLimitsRounds {
				srv, peer := net.Pipe()
				tc := l.admit(srv)
				if n := l.counts(); n.Open > maxConns || n.Unauthenticated > maxUnauth {
					t.Errorf("counts %+v over the bounds", n)
				}
				if tc != nil {
					if (w+i)%2 == 0 {
						r := httptest.NewRequestWithContext(l.connContext(context.Background(), tc), http.MethodGet, "/v1/models", nil)
						l.authenticated(r)
					}
					l.connState(tc, http.StateClosed)
				}
				_ = srv.Close()
				_ = peer.Close()
			}
		})
	}
	wg.Wait()
	if n := l.counts(); n.Open != 0 || n.Unauthenticated != 0 {
		t.Fatalf("counts %+v after every connection closed", n)
	}
}
