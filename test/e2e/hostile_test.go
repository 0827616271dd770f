package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/procstat"
)

// Bounds of the hostile traffic test.
const (
	// hostileRSSBound is the router's peak resident memory (VmHWM) the
	// hostile traffic must stay under: three quarters of the DaemonSet's
	// 256 Mi limit. The default 64 MiB body budget, as much again of
	// garbage (the buffers' earlier, smaller copies and refused bodies,
	// until the collector runs) and the runtime came to 136-149 MiB here;
	// without the budget the same traffic took 354 MiB.
	hostileRSSBound = 192 << 20
	// hostileClients is the number of clients sending 15 MiB of a 16 MiB
	// body and holding their connections open: 240 MiB of bodies, where
	// the router's default budget is 64 MiB.
	hostileClients = 16
	// hostileBodyAnnounced and hostileBodySent are each hostile client's
	// announced Content-Length (the default --max-body-bytes) and the
	// bytes it sends before it stops.
	hostileBodyAnnounced, hostileBodySent = 16 << 20, 15 << 20
	// hostileMemberRequests is the number of requests to each hostile
	// member fault; ordinaryRequests the requests to the ordinary tier.
	hostileMemberRequests, ordinaryRequests = 8, 40
)

// TestHostileTrafficBounded runs hostile members (a response header line
// that never ends, 100 Continue without end) and hostile clients (many large
// bodies, sent but never finished) against one router built without the
// race detector, and checks: every hostile member request gets 502
// upstream_unavailable, large bodies beyond the body budget get 503
// body_buffer_exhausted, every request to an ordinary tier in the meantime
// gets 200, the router's peak RSS stays under 192 MiB, and once the
// clients are gone it holds no lease and no body byte and still serves.
func TestHostileTrafficBounded(t *testing.T) {
	good := startEngine(t, "good")
	hostile := startEngine(t, "hostile", "--allow-fault-header")
	goodTier := tier{name: "ordinary", alias: "e2e-ordinary", members: []member{{"good0", good, 64}}}
	badTier := tier{name: "hostile", alias: "e2e-hostile", members: []member{{"bad0", hostile, 64}}}
	r := startRouterBin(t, bins.plainRouter, nil, goodTier, badTier)

	// Hostile clients: each sends its head and 15 MiB of its body, then
	// waits for an answer until the test closes it.
	clients := make([]*hostileClient, hostileClients)
	var wrote sync.WaitGroup
	for i := range clients {
		c, err := dialHostile(r.front)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		t.Cleanup(c.close)
		wrote.Go(c.send)
	}
	wrote.Wait() // the router read each body or refused it.

	// Hostile members and the ordinary tier, at once.
	var wg sync.WaitGroup
	failures := make(chan string, 2*hostileMemberRequests+ordinaryRequests)
	for _, fault := range []enginesim.Fault{enginesim.FaultEndlessHeader, enginesim.FaultInformationalFlood} {
		wg.Go(func() {
			for range hostileMemberRequests {
				status, code, err := postFault(r, badTier.alias, fault)
				if err != nil || status != http.StatusBadGateway || code != "upstream_unavailable" {
					failures <- fmt.Sprintf("%s: %d %s %v, want 502 upstream_unavailable", fault, status, code, err)
				}
			}
		})
	}
	wg.Go(func() {
		for range ordinaryRequests {
			resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(goodTier.alias, 4, false))
			if err != nil || resp.status != http.StatusOK {
				failures <- fmt.Sprintf("ordinary tier: %d %s %v, want 200", resp.status, resp.body, err)
			}
		}
	})
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	mem, err := procstat.Read(r.Pid())
	if err != nil {
		t.Fatal(err)
	}
	peak := mem.HWMKiB << 10
	refused := 0
	for _, c := range clients {
		if c.refused() {
			refused++
		}
	}
	t.Logf("router peak RSS %.1f MiB; %d of %d large bodies refused with 503 body_buffer_exhausted",
		float64(peak)/(1<<20), refused, hostileClients)
	if peak >= hostileRSSBound {
		t.Errorf("router peak RSS %d bytes, want under %d", peak, hostileRSSBound)
	}
	if refused == 0 || refused == hostileClients {
		t.Errorf("%d of %d large bodies refused, want some refused and some held", refused, hostileClients)
	}

	for _, c := range clients {
		c.close()
	}
	for _, tr := range []tier{goodTier, badTier} {
		r.awaitActive(t, tr.key(), 0)
	}
	eventually(t, "no body bytes held", func() (bool, string) {
		held, err := r.metric("sluice_request_body_buffered_bytes")
		return err == nil && held == 0, fmt.Sprintf("%v bytes held, %v", held, err)
	})
	resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(goodTier.alias, 4, false))
	if err != nil || resp.status != http.StatusOK {
		t.Fatalf("after the hostile traffic: %d %v", resp.status, err)
	}
}

// hostileClient is a connection that announces a large body, sends most of
// it and never the rest.
type hostileClient struct {
	conn net.Conn
	once sync.Once
	// status is the status line the router answered, read by send.
	mu     sync.Mutex
	status string
}

// dialHostile connects to the router's front door.
func dialHostile(addr string) (*hostileClient, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &hostileClient{conn: conn}, nil
}

// send writes the head and hostileBodySent bytes of the body, stopping at
// the first write error (the router refused the body and closed), and
// reads the answer's status line when one came.
func (c *hostileClient) send() {
	_ = c.conn.SetDeadline(time.Now().Add(waitTimeout))
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(hostileBodyAnnounced) + "\r\n\r\n" + `{"model":"e2e-ordinary","pad":"`
	if _, err := io.WriteString(c.conn, head); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("x"), 256<<10)
	for sent := 0; sent < hostileBodySent; sent += len(chunk) {
		if _, err := c.conn.Write(chunk); err != nil {
			break
		}
	}
	// A refused body's answer is on the connection already; a held one's
	// never comes: wait briefly.
	_ = c.conn.SetReadDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c.conn).ReadString('\n')
	c.mu.Lock()
	c.status = line
	c.mu.Unlock()
}

// refused reports whether the router answered 503 (the body budget was
// exhausted: the one 503 a request gets before its alias is looked up).
func (c *hostileClient) refused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.HasPrefix(c.status, "HTTP/1.1 503 ")
}

func (c *hostileClient) close() { c.once.Do(func() { _ = c.conn.Close() }) }

// postFault sends a request to alias with the enginesim fault f and returns
// the status and error code it got.
func postFault(r *router, alias string, f enginesim.Fault) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL()+"/chat/completions",
		strings.NewReader(chatBody(alias, 4, false)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(enginesim.FaultHeader, string(f))
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, errorCode(body), err
}

// metric returns the value of an unlabelled series of the router's
// /metrics.
func (r *router) metric(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(rest, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}
