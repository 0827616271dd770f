//go:build unix

package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sockpeek"
)

// plainRequest is a small request whose timeouts no test reaches.
func plainRequest(body []byte) *Request {
	return &Request{Method: http.MethodPost, Path: "/v1/chat/completions", Header: http.Header{}, Body: body,
		HeaderTimeout: failSafe, IdleTimeout: failSafe}
}

// TestSendWaitsForTheAnswer proves that Send on a plain TCP connection
// returns once the member's answer is in the socket, so the head's first
// read finds it, and that the context's cancellation ends that wait: Send
// then reports the request written, and ReadHead the failure.
func TestSendWaitsForTheAnswer(t *testing.T) {
	answer := make(chan struct{})
	got := make(chan struct{}, 1)
	srv, _, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- struct{}{}
		if r.URL.Query().Get("hold") != "" {
			<-answer
			return
		}
		_, _ = io.WriteString(w, "{}")
	})
	defer close(answer)
	c := New()
	defer c.Close()
	tg := targetOf(srv)

	var a Attempt
	if err := c.Send(t.Context(), &a, tg, plainRequest([]byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	if st := sockpeek.Peek(a.c.raw); st != sockpeek.Data {
		t.Fatalf("Send returned with the socket %v, want the answer waiting (%v)", st, sockpeek.Data)
	}
	if head, err := a.ReadHead(); err != nil || head.Status != http.StatusOK {
		t.Fatalf("ReadHead: %+v, %v", head, err)
	}
	_, _ = io.Copy(io.Discard, &a)
	_ = a.Close()
	<-got

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	held := plainRequest([]byte(`{}`))
	held.RawQuery = "hold=1"
	sent := make(chan error, 1)
	var b Attempt
	go func() { sent <- c.Send(ctx, &b, tg, held) }()
	select {
	case <-got:
	case <-time.After(failSafe):
		t.Fatal("the member never got the request")
	}
	cancel()
	select {
	case err := <-sent:
		if err != nil || !b.Sent() {
			t.Fatalf("Send: %v, sent %v; want the request written", err, b.Sent())
		}
	case <-time.After(failSafe):
		t.Fatal("Send waited on after the cancellation")
	}
	if _, err := b.ReadHead(); err == nil {
		t.Fatal("ReadHead succeeded after the cancellation")
	}
}

// TestSendFinishesAPartialWrite proves a request the socket takes only in
// part (send buffers far below its size) reaches the member whole: the
// connection's own Write finishes what the raw write left.
func TestSendFinishesAPartialWrite(t *testing.T) {
	got := make(chan []byte, 1)
	srv, _, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		_, _ = io.WriteString(w, "{}")
	})
	setBuffer(t, srv.Listener.(*net.TCPListener), syscall.SO_RCVBUF) // the member's end inherits it.
	c := New()
	defer c.Close()
	tg := targetOf(srv)
	cn, err := c.dial(t.Context(), tg, time.Now().Add(failSafe))
	if err != nil {
		t.Fatal(err)
	}
	setBuffer(t, cn.raw.(*net.TCPConn), syscall.SO_SNDBUF)
	body := bytes.Repeat([]byte("x"), inlineBodySize)
	a := Attempt{client: c, target: tg, ctx: t.Context(), deadline: time.Now().Add(failSafe), req: plainRequest(body)}
	if err := a.write(cn); err != nil {
		t.Fatal(err)
	}
	if head, err := a.ReadHead(); err != nil || head.Status != http.StatusOK {
		t.Fatalf("ReadHead: %+v, %v", head, err)
	}
	_, _ = io.Copy(io.Discard, &a)
	_ = a.Close()
	if b := <-got; !bytes.Equal(b, body) {
		t.Fatalf("the member got %d bytes, want the %d sent", len(b), len(body))
	}
}

// setBuffer sets a socket's buffer option to its least size.
func setBuffer(t *testing.T, sc syscall.Conn, opt int) {
	t.Helper()
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 1024) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
}

// TestSendPastDeadline proves a request whose header deadline passed
// before it was written is not written: a timeout, not ErrNotSent, and not
// sent.
func TestSendPastDeadline(t *testing.T) {
	srv, _, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the member got a request")
	})
	c := New()
	defer c.Close()
	tg := targetOf(srv)
	cn, err := c.dial(t.Context(), tg, time.Now().Add(failSafe))
	if err != nil {
		t.Fatal(err)
	}
	a := Attempt{client: c, target: tg, ctx: t.Context(), deadline: time.Now().Add(-time.Second), req: plainRequest([]byte(`{}`))}
	err = a.write(cn)
	if !isTimeout(err) || errors.Is(err, ErrNotSent) || a.Sent() {
		t.Fatalf("write: %v, sent %v; want a timeout, the request not sent", err, a.Sent())
	}
}

// TestSendAllocatesNothing proves that sending on a connection and waiting
// for the answer allocates nothing per request.
func TestSendAllocatesNothing(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	go func() { // answers every read with one byte.
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		buf := make([]byte, 64)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(buf[:1]); err != nil {
				return
			}
		}
	}()
	c := New()
	defer c.Close()
	addr := ln.Addr().String()
	cn, err := c.dial(t.Context(), &Target{Addr: addr, Scheme: "http", Host: addr}, time.Now().Add(failSafe))
	if err != nil {
		t.Fatal(err)
	}
	defer cn.close()
	req := []byte("x")
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := cn.send(req); n != len(req) || err != nil {
			t.Fatalf("send: %d, %v", n, err)
		}
		if _, err := cn.br.ReadByte(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("send allocates %v times per request", allocs)
	}
}
