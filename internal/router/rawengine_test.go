package router

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
)

// rawEngine is a member speaking HTTP/1.1 by hand on a loopback listener,
// for behaviour net/http's server does not offer: each accepted connection
// is handed to serve on its own goroutine. It counts accepted connections
// and keeps each open one by its remote address (the router's local one).
// The listener and every connection are closed when the test ends.
type rawEngine struct {
	t     *testing.T
	ln    net.Listener
	url   string
	serve func(c net.Conn, br *bufio.Reader)

	mu       sync.Mutex
	accepted int
	conns    map[string]net.Conn
	wg       sync.WaitGroup
}

// newRawEngine starts a raw engine.
func newRawEngine(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawEngine {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &rawEngine{t: t, ln: ln, url: "http://" + ln.Addr().String(), serve: serve, conns: map[string]net.Conn{}}
	e.wg.Add(1)
	go e.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// accept serves connections until the listener closes.
func (e *rawEngine) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		key := c.RemoteAddr().String()
		e.mu.Lock()
		e.accepted++
		e.conns[key] = c
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() {
				e.mu.Lock()
				delete(e.conns, key)
				e.mu.Unlock()
				_ = c.Close()
			}()
			e.serve(c, bufio.NewReader(c))
		}()
	}
}

// closeConn closes the engine's end of the connection whose remote address
// is addr, as an engine's keep-alive timeout does, and reports whether it
// was open. net.Conn.Close returns once the socket is closed: its FIN is
// on its way.
func (e *rawEngine) closeConn(addr string) bool {
	e.mu.Lock()
	c, ok := e.conns[addr]
	e.mu.Unlock()
	if ok {
		_ = c.Close()
	}
	return ok
}

// acceptedConns returns how many connections the engine accepted.
func (e *rawEngine) acceptedConns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accepted
}
