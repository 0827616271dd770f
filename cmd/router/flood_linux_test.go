package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/procstat"
)

// The connection flood of TestRunRSSUnderConnectionFlood.
const (
	// floodConns is how many unauthenticated connections the flood opens
	// and keeps open: the count that took the router past its memory
	// limit before the connection limits.
	floodConns = 13_000
	// floodRSSBoundKiB is the router's documented memory bound under the
	// flood (docs/CONFIGURATION.md#11-connection-limits): 192 MiB, three
	// quarters of the DaemonSet's 256 Mi limit.
	floodRSSBoundKiB = 192 << 10
	// floodCheckEvery is how many flood connections are opened between
	// two authenticated requests.
	floodCheckEvery = 1000
	// floodKeepAlive is how many authenticated keep-alive connections are
	// opened before the flood and must still serve after it.
	floodKeepAlive = 8
	// floodTimeout bounds the whole test: the flood takes a few seconds.
	floodTimeout = 50 * time.Second
)

// startedLine is the router's log line once both listeners are up.
type startedLine struct {
	Msg         string `json:"msg"`
	Listen      string `json:"listen"`
	AdminListen string `json:"admin_listen"`
}

// childRouter runs the router command in a process of its own (this test
// binary, re-executed, see TestMain), so that its memory is measured alone,
// and returns its pid and front door and admin addresses. It is stopped
// with SIGTERM when the test ends.
func childRouter(t *testing.T, args ...string) (pid int, front, admin net.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), floodTimeout)
	cmd := exec.CommandContext(ctx, os.Args[0], args...) //nolint:gosec // the test binary itself.
	cmd.Env = append(os.Environ(), childRouterEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		cancel()
	})
	started := make(chan startedLine, 1)
	go func() { // ends with the process's stderr.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l startedLine
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "router started" {
				started <- l
			}
		}
	}()
	select {
	case l := <-started:
		fa, err1 := net.ResolveTCPAddr("tcp", l.Listen)
		aa, err2 := net.ResolveTCPAddr("tcp", l.AdminListen)
		if err1 != nil || err2 != nil {
			t.Fatalf("addresses %+v: %v %v", l, err1, err2)
		}
		return cmd.Process.Pid, fa, aa
	case <-ctx.Done():
		t.Fatal("the router process did not start")
	}
	return 0, nil, nil
}

// raiseFileLimit makes room for n more file descriptors in this process.
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

// gaugeValue reads a gauge without labels from a scrape.
func gaugeValue(t *testing.T, metrics, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("no %s in the metrics", name)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// TestRunRSSUnderConnectionFlood opens 13,000 front door connections that
// never authenticate — half silent, half sending GET /v1/models without a
// key — and keeps them open, against the router run with its default
// connection limits in a process of its own. The router's peak resident
// memory stays within 192 MiB, its open and unauthenticated connections
// within the defaults, and requests with the key are served throughout,
// on new connections and on keep-alive ones opened before the flood.
func TestRunRSSUnderConnectionFlood(t *testing.T) {
	raiseFileLimit(t, floodConns+1024)
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	dir, keys := writeConfig(t, up.URL)
	pid, front, admin := childRouter(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--api-keys-file", keys, "--shutdown-grace", "0s", "--shutdown-timeout", "1s")
	deadline := time.Now().Add(floodTimeout)

	kept := make([]net.Conn, floodKeepAlive)
	readers := make([]*bufio.Reader, floodKeepAlive)
	for i := range kept {
		kept[i], readers[i] = authenticatedConn(t, front)
	}
	flood := make([]net.Conn, 0, floodConns)
	t.Cleanup(func() {
		for _, c := range flood {
			_ = c.Close()
		}
	})
	dialer := &net.Dialer{Timeout: failSafe}
	for i := range floodConns {
		if time.Now().After(deadline) {
			t.Fatalf("only %d connections opened in %v", i, floodTimeout)
		}
		c, err := dialer.DialContext(context.Background(), "tcp", front.String())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		flood = append(flood, c)
		if i%2 == 1 {
			// A write to a connection the router already closed may fail;
			// either way the connection never authenticates.
			_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n")
		}
		if i%floodCheckEvery == floodCheckEvery-1 {
			conn, _ := authenticatedConn(t, front)
			_ = conn.Close()
		}
	}
	for i, c := range kept {
		if _, err := io.WriteString(c, modelsRequest); err != nil {
			t.Fatalf("keep-alive connection %d: %v", i, err)
		}
		if r := readRawResponseFrom(t, c, readers[i]); r.status != 200 {
			t.Fatalf("keep-alive connection %d after the flood: %+v", i, r)
		}
	}
	mem, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d connections: router VmRSS %d KiB, VmHWM %d KiB", floodConns, mem.RSSKiB, mem.HWMKiB)
	if mem.HWMKiB > floodRSSBoundKiB {
		t.Errorf("router peak RSS %d KiB, above the %d KiB bound", mem.HWMKiB, floodRSSBoundKiB)
	}
	metrics := scrape(t, admin)
	open := gaugeValue(t, metrics, "sluice_front_door_connections")
	unauth := gaugeValue(t, metrics, "sluice_front_door_unauthenticated_connections")
	if open > defaultMaxConnections || unauth > defaultMaxUnauthenticated {
		t.Errorf("%d open, %d unauthenticated; above the defaults %d, %d", open, unauth, defaultMaxConnections, defaultMaxUnauthenticated)
	}
	if unauth == 0 || open < floodKeepAlive {
		t.Errorf("%d open, %d unauthenticated: want the flood's newest and the keep-alive ones", open, unauth)
	}
}

// readRawResponseFrom reads one response from conn through br, bounded by
// failSafe.
func readRawResponseFrom(t *testing.T, conn net.Conn, br *bufio.Reader) rawResponse {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{status: resp.StatusCode, close: resp.Close, body: string(b)}
}
