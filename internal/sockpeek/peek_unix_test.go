//go:build unix

package sockpeek

import (
	"context"
	"net"
	"testing"
)

// pairer listens on loopback and returns a function that opens one more
// connection to the listener and returns both of its ends, closed when
// the test ends.
func pairer(t *testing.T) func() (client, server net.Conn) {
	t.Helper()
	ctx := context.Background()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return func() (client, server net.Conn) {
		t.Helper()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		return c, s
	}
}

// TestPeek checks each state: an open connection, one with bytes waiting,
// one whose peer closed it (FIN), one whose peer reset it (RST), one closed
// on this side, and a connection that is not a socket.
func TestPeek(t *testing.T) {
	pair := pairer(t)
	c, s := pair()
	if got := Peek(s); got != Open {
		t.Fatalf("an open connection reads as %v", got)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	awaitPeek(t, s, Data)
	var b [1]byte
	if n, err := s.Read(b[:]); n != 1 || err != nil {
		t.Fatalf("the peeked byte was consumed: %d, %v", n, err)
	}

	c, s = pair()
	_ = c.Close()
	awaitPeek(t, s, Closed)

	c, s = pair()
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
	awaitPeek(t, s, Closed)

	_, s = pair()
	_ = s.Close()
	if got := Peek(s); got != Closed {
		t.Fatalf("a connection closed locally reads as %v", got)
	}

	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := Peek(p1); got != Unknown {
		t.Fatalf("a pipe reads as %v", got)
	}
}

// awaitPeek checks that Peek(s) is want. On loopback the peer's bytes, FIN
// or RST are queued before its write or close returns, so one look
// suffices; the bounded loop only spares a test failure on a kernel that
// delivers later.
func awaitPeek(t *testing.T, s net.Conn, want State) {
	t.Helper()
	awaitState(t, func() State { return Peek(s) }, want)
}

// awaitState checks that peek returns want, as awaitPeek does.
func awaitState(t *testing.T, peek func() State, want State) {
	t.Helper()
	const attempts = 1000
	got := Unknown
	for range attempts {
		if got = peek(); got == want {
			return
		}
	}
	t.Fatalf("Peek = %v after %d looks, want %v", got, attempts, want)
}

// TestPeekerFollowsOneConnection checks that one Peeker sees a connection
// go through its states, and peeks without allocating.
func TestPeekerFollowsOneConnection(t *testing.T) {
	c, s := pairer(t)()
	p := NewPeeker(s)
	if got := p.Peek(); got != Open {
		t.Fatalf("an open connection reads as %v", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { p.Peek() }); allocs != 0 {
		t.Fatalf("Peek allocates %v times", allocs)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	awaitState(t, p.Peek, Data)
	var b [1]byte
	if n, err := s.Read(b[:]); n != 1 || err != nil {
		t.Fatalf("reading the peeked byte: %d, %v", n, err)
	}
	if got := p.Peek(); got != Open {
		t.Fatalf("after the byte was read the connection reads as %v", got)
	}
	_ = c.Close()
	awaitState(t, p.Peek, Closed)

	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := NewPeeker(p1).Peek(); got != Unknown {
		t.Fatalf("a pipe reads as %v", got)
	}
}
