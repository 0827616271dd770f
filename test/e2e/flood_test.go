package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/procstat"
)

// The connection flood of TestConnectionFloodBounded.
const (
	// floodConns is how many unauthenticated connections the flood opens
	// and keeps open: the count that took the router to 298 MB, past its
	// 256 Mi limit, before the connection limits.
	floodConns = 13_000
	// floodRSSBound is the router's peak resident memory (VmHWM) under the
	// flood (docs/CONFIGURATION.md#11-connection-limits): three quarters
	// of the DaemonSet's 256 Mi limit.
	floodRSSBound = 192 << 20
	// floodMaxConns and floodMaxUnauth are the router's default
	// --max-connections and --max-unauthenticated-connections.
	floodMaxConns, floodMaxUnauth = 4096, 1024
	// floodCheckEvery is how many flood connections are opened between
	// two requests with the key on new connections.
	floodCheckEvery = 1000
	// floodKeepAlive is how many keep-alive connections with the key are
	// opened before the flood and must still serve after it.
	floodKeepAlive = 8
	// floodTimeout bounds the flood: it takes a few seconds.
	floodTimeout = 40 * time.Second
	// floodFileMargin is the file descriptors the test needs besides the
	// flood's connections.
	floodFileMargin = 1024
)

// floodKey is the API key of TestConnectionFloodBounded.
const floodKey = "e2e-flood-key"

// modelsRequest is GET /v1/models with floodKey.
const modelsRequest = "GET /v1/models HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer " + floodKey + "\r\n\r\n"

// raiseFileLimit makes room for n file descriptors in this process.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = max(lim.Max, n)
	lim.Max = lim.Cur
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("RLIMIT_NOFILE below %d and not raised (run as root): %v", n, err)
	}
}

// keyedConn is a keep-alive connection to the front door that
// authenticated with a GET /v1/models.
type keyedConn struct {
	net.Conn
	br *bufio.Reader
}

// models sends GET /v1/models with the key and returns the status.
func (c *keyedConn) models(t *testing.T) int {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(httpTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, modelsRequest); err != nil {
		t.Fatalf("GET /v1/models with the key: %v", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("GET /v1/models with the key: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// dialKeyed opens a connection and authenticates it.
func dialKeyed(t *testing.T, addr string) *keyedConn {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: httpTimeout}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &keyedConn{Conn: conn, br: bufio.NewReader(conn)}
	if s := c.models(t); s != http.StatusOK {
		t.Fatalf("GET /v1/models with the key: %d", s)
	}
	return c
}

// TestConnectionFloodBounded opens 13,000 front door connections that
// never authenticate — half silent, half sending GET /v1/models without a
// key — and keeps them all open, against the plain router with its default
// connection limits. The router's peak RSS stays under 192 MiB, its open
// and unauthenticated connections within the limits, and requests with
// the key succeed throughout: on a new connection after every thousand,
// and on keep-alive connections opened before the flood.
func TestConnectionFloodBounded(t *testing.T) {
	raiseFileLimit(t, floodConns+floodFileMargin)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(floodKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, "flood")
	tr := tier{name: "flood", alias: "e2e-flood", members: []member{{"m0", e, 4}}}
	r := startRouterBin(t, bins.plainRouter, []string{"--api-keys-file", keys}, tr)

	kept := make([]*keyedConn, floodKeepAlive)
	for i := range kept {
		kept[i] = dialKeyed(t, r.front)
		defer func() { _ = kept[i].Close() }()
	}
	flood := make([]net.Conn, 0, floodConns)
	defer func() {
		for _, c := range flood {
			_ = c.Close()
		}
	}()
	deadline := time.Now().Add(floodTimeout)
	dialer := &net.Dialer{Timeout: httpTimeout}
	for i := range floodConns {
		if time.Now().After(deadline) {
			t.Fatalf("only %d connections opened in %v", i, floodTimeout)
		}
		c, err := dialer.DialContext(context.Background(), "tcp", r.front)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		flood = append(flood, c)
		if i%2 == 1 {
			// The router may have closed the connection already; either
			// way it never authenticates.
			_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n")
		}
		if i%floodCheckEvery == floodCheckEvery-1 {
			_ = dialKeyed(t, r.front).Close()
		}
	}
	for i, c := range kept {
		if s := c.models(t); s != http.StatusOK {
			t.Fatalf("keep-alive connection %d after the flood: %d", i, s)
		}
	}
	mem, err := procstat.Read(r.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d connections: router VmRSS %d KiB, VmHWM %d KiB", floodConns, mem.RSSKiB, mem.HWMKiB)
	if mem.HWMKiB<<10 > floodRSSBound {
		t.Errorf("router peak RSS %d KiB, above the %d KiB bound", mem.HWMKiB, floodRSSBound>>10)
	}
	open, err := r.metric("sluice_front_door_connections")
	if err != nil {
		t.Fatal(err)
	}
	unauth, err := r.metric("sluice_front_door_unauthenticated_connections")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v connections open, %v unauthenticated", open, unauth)
	if open > floodMaxConns || unauth > floodMaxUnauth || open < floodKeepAlive {
		t.Errorf("%v open, %v unauthenticated; want at least the %d keep-alive ones, within %d and %d",
			open, unauth, floodKeepAlive, floodMaxConns, floodMaxUnauth)
	}
}
