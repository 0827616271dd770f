//go:build unix

package enginesim

import (
	"context"
	"net"
	"testing"
)

// TestPeerClosed checks the socket peek the request log uses: an open
// connection, one whose peer closed it (FIN) and one whose peer reset it
// (RST).
func TestPeerClosed(t *testing.T) {
	ctx := context.Background()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
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

	c, s := pair()
	if peerClosed(s) {
		t.Fatal("an open connection reads as closed")
	}
	// Bytes from the peer are not a close.
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	awaitPeek(t, s, false)

	c, s = pair()
	_ = c.Close()
	awaitPeek(t, s, true)

	c, s = pair()
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
	awaitPeek(t, s, true)

	// A connection closed on this side reads as closed.
	_, s = pair()
	_ = s.Close()
	if !peerClosed(s) {
		t.Fatal("a connection closed locally reads as open")
	}
}

// awaitPeek checks that peerClosed(s) is want. On loopback the peer's FIN
// or RST is queued before its close returns, so one look suffices; the
// bounded loop only spares a test failure on a kernel that delivers later.
func awaitPeek(t *testing.T, s net.Conn, want bool) {
	t.Helper()
	const attempts = 1000
	for range attempts {
		if peerClosed(s) == want {
			return
		}
	}
	t.Fatalf("peerClosed = %v after %d looks, want %v", !want, attempts, want)
}
