package upstream

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitState waits for a member connection to reach state.
func waitState(t *testing.T, states <-chan http.ConnState, state http.ConnState) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case s := <-states:
			if s == state {
				return
			}
		case <-deadline:
			t.Fatalf("no member connection reached %s", state)
		}
	}
}

// TestReaperStops proves the client's reaper closes a connection once it
// was idle for the idle timeout on the client's clock, without waiting for
// another request, and that Close stops the reaper.
func TestReaperStops(t *testing.T) {
	const idle = 4 * time.Second
	srv, conns, states := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	})
	fc := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := New(WithClock(fc), WithIdleTimeout(idle))
	do(t, c, targetOf(srv), nil)
	waitState(t, states, http.StateIdle)
	// The reaper checks every idle/reaperChecksPerTimeout; stepping past
	// the timeout in such steps makes it close the connection.
	for range reaperChecksPerTimeout + 1 {
		fc.Step(idle / reaperChecksPerTimeout)
	}
	waitState(t, states, http.StateClosed)
	do(t, c, targetOf(srv), nil)
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2: the reaped one must not be reused", n)
	}
	c.Close()
	select {
	case <-c.done:
	default:
		t.Fatal("the reaper still runs after Close")
	}
	c.Close() // idempotent.
}

// TestBeforeWrite proves the WithBeforeWrite hook runs for a reused
// connection only, with its local address.
func TestBeforeWrite(t *testing.T) {
	srv, _, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	})
	var locals []net.Addr
	c := New(WithBeforeWrite(func(local net.Addr) { locals = append(locals, local) }))
	defer c.Close()
	do(t, c, targetOf(srv), nil)
	if len(locals) != 0 {
		t.Fatalf("the hook ran for a fresh connection: %v", locals)
	}
	do(t, c, targetOf(srv), nil)
	if len(locals) != 1 || locals[0] == nil {
		t.Fatalf("hook calls %v, want one with the reused connection's address", locals)
	}
}

// TestCloseIdleSince proves the reaper's selection: exactly the
// connections idle since before the cutoff are closed, of every member.
func TestCloseIdleSince(t *testing.T) {
	c := New(WithIdleTimeout(time.Hour))
	defer c.Close()
	base := time.Unix(1_700_000_000, 0)
	var closed []string
	for i, addr := range []string{"a:1", "a:1", "b:1", "a:1"} {
		cn := &conn{addr: addr, idleSince: base.Add(time.Duration(i) * time.Second), raw: &recordingConn{name: fmt.Sprint(i), closed: &closed}}
		cn.conn = cn.raw
		c.idle[addr] = append(c.idle[addr], cn)
	}
	c.closeIdleSince(base.Add(2 * time.Second))
	if fmt.Sprint(closed) != "[0 1]" || len(c.idle["a:1"]) != 1 || len(c.idle["b:1"]) != 1 {
		t.Fatalf("closed %v, left a:%d b:%d; want 0 and 1 closed, one left each", closed, len(c.idle["a:1"]), len(c.idle["b:1"]))
	}
	c.CloseIdleExcept(map[string]bool{"b:1": true})
	if fmt.Sprint(closed) != "[0 1 3]" || len(c.idle) != 1 || len(c.idle["b:1"]) != 1 {
		t.Fatalf("closed %v, idle %v; want only b:1 kept", closed, c.idle)
	}
}

// recordingConn is a net.Conn that records its Close.
type recordingConn struct {
	net.Conn
	name   string
	closed *[]string
}

func (c *recordingConn) Close() error {
	*c.closed = append(*c.closed, c.name)
	return nil
}
