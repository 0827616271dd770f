//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/handover"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// foreignUID is the uid (and gid) the tests run a peer process as: not
// the suite's (root in CI), so that the kernel reports another uid for it.
const foreignUID = 65534

// The environment of the peer process (runPeer), which the tests run as
// a child process of another uid.
const (
	// peerModeEnv is the child's part: "successor" or "predecessor".
	peerModeEnv = "SLUICE_TEST_HANDOVER_PEER"
	// peerNameEnv is the handover channel's name.
	peerNameEnv = "SLUICE_TEST_HANDOVER_NAME"
	// peerSnapshot is what the child, as a predecessor, answers every
	// hello with: leases within the tiers' ceilings, so that only the uid
	// check refuses them.
	peerSnapshot = `{"kind":"snapshot","counts":[{"tier":"ns/llama","member":"gpu0","count":4}]}`
)

// TestMain runs the tests, or, when the environment names a part
// (peerModeEnv), is the peer process of another uid the tests below start
// from this binary (runPeer).
func TestMain(m *testing.M) {
	if mode := os.Getenv(peerModeEnv); mode != "" {
		if err := runPeer(mode, os.Getenv(peerNameEnv)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runPeer is the peer process. As a "successor" it connects to the
// channel name, sends a valid hello and prints the first line it gets
// back, or "closed"; as a "predecessor" it holds the name, prints
// "listening", and answers every hello with peerSnapshot. It ends when its
// standard input closes.
func runPeer(mode, name string) error {
	switch mode {
	case "successor":
		conn, err := dialHandover(context.Background(), name)
		if err != nil {
			return err
		}
		_, _ = io.WriteString(conn, `{"kind":"hello","version":"`+handover.Version+`"}`+"\n")
		_ = conn.SetReadDeadline(time.Now().Add(failSafe))
		if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
			fmt.Print("got " + line)
		} else {
			fmt.Println("closed")
		}
	case "predecessor":
		ln, err := listenHandover(name)
		if err != nil {
			return err
		}
		fmt.Println("listening")
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					if _, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
						_, _ = io.WriteString(conn, peerSnapshot+"\n")
					}
				}()
			}
		}()
	default:
		return fmt.Errorf("unknown peer mode %q", mode)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// foreignPeer runs the peer process (runPeer) in mode on the channel name as
// uid and gid foreignUID, and returns its output; it ends when the test
// does. It needs root (which CI has) to change uid.
func foreignPeer(t *testing.T, mode, name string) *bufio.Reader {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting a process of another uid needs root; CI runs the suite as root")
	}
	// The test binary lives in a directory only its owner may enter: the
	// peer runs a copy in one anybody may.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sluice-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "peer.test")
	b, err := os.ReadFile(self) //nolint:gosec // This test binary.
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil { //nolint:gosec // The peer must run it as another uid.
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // The peer must enter it as another uid.
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*failSafe)
	cmd := exec.CommandContext(ctx, bin) //nolint:gosec // A copy of this test binary.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), peerModeEnv+"="+mode, peerNameEnv+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: foreignUID, Gid: foreignUID}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Logf("the peer process: %v; its stderr: %s", err, stderr.String())
		}
		cancel()
	})
	return bufio.NewReader(stdout)
}

// peerLine returns the next line the peer printed, or fails the test.
func peerLine(t *testing.T, out *bufio.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		l, _ := out.ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	return waitFor(t, line, "the peer process")
}

// waitFor returns the value received from c or fails the test after
// failSafe.
func waitFor[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(failSafe):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// logLines is a slog handler passing each record's message and attributes,
// as one line, to a channel; lines past its buffer are dropped.
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logLines) WithGroup(string) slog.Handler            { return l }

func (l logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	select {
	case l <- b.String():
	default:
	}
	return nil
}

// awaitLog waits for a line of logs containing each of parts.
func awaitLog(t *testing.T, logs logLines, parts ...string) string {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case line := <-logs:
			found := true
			for _, p := range parts {
				found = found && strings.Contains(line, p)
			}
			if found {
				return line
			}
		case <-deadline:
			t.Fatalf("no log line with %q", parts)
		}
	}
}

// unchangedSuccession is a started succession with no predecessor, around
// a front door handler that records the requests it serves itself.
type unchangedSuccession struct {
	s       *succession
	name    string
	logs    logLines
	applied chan source.Snapshot
	served  chan string
	front   http.Handler
}

// startUnchanged starts a succession on a channel name no other test uses.
func startUnchanged(t *testing.T, opts ...successionOption) *unchangedSuccession {
	t.Helper()
	u := &unchangedSuccession{logs: make(logLines, 64), applied: make(chan source.Snapshot, 4), served: make(chan string, 4)}
	rt := router.New(router.Options{})
	t.Cleanup(rt.Close)
	u.s = newSuccession(rt, slog.New(u.logs), func(snap source.Snapshot) { u.applied <- snap }, func() {}, opts...)
	u.front = u.s.handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { u.served <- r.URL.Path }), new(atomic.Bool))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); u.s.stop() })
	addr := fmt.Sprintf("127.0.0.1:%d-%s", time.Now().UnixNano(), t.Name())
	u.s.start(ctx, addr)
	u.name = handoverName(addr)
	return u
}

// assertAdmitting fails the test unless the router serves requests itself
// and applies configuration at once: nothing was handed over.
func (u *unchangedSuccession) assertAdmitting(t *testing.T) {
	t.Helper()
	if u.s.forwarding.Load() {
		t.Fatal("the router forwards its requests")
	}
	w := httptest.NewRecorder()
	u.front.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", nil))
	select {
	case <-u.served:
	default:
		t.Fatalf("the request was not served by the router: %d %s", w.Code, w.Body)
	}
	u.s.configure(source.Snapshot{Tiers: []source.Tier{{Key: "ns/applied"}}})
	select {
	case snap := <-u.applied:
		if len(snap.Tiers) != 1 || snap.Tiers[0].Key != "ns/applied" {
			t.Fatalf("applied %+v", snap)
		}
	default:
		t.Fatal("the configuration was held back")
	}
}

// helloSuccessor connects to name as a successor of this uid would and
// returns its connection once the snapshot arrived.
func helloSuccessor(t *testing.T, name string) net.Conn {
	t.Helper()
	conn, err := dialHandover(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_, _ = io.WriteString(conn, `{"kind":"hello","version":"`+handover.Version+`"}`+"\n")
	_ = conn.SetReadDeadline(time.Now().Add(failSafe))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, `"kind":"snapshot"`) {
		t.Fatalf("snapshot %q, %v", line, err)
	}
	return conn
}

// TestSuccessionIgnoresSilentPeer: a process of the router's uid that
// connects to the handover channel and says nothing changes nothing:
// once its hello deadline passed it is dropped, and the router serves
// requests itself and applies configuration all along.
func TestSuccessionIgnoresSilentPeer(t *testing.T) {
	u := startUnchanged(t, withHelloTimeout(50*time.Millisecond))
	silent, err := dialHandover(context.Background(), u.name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	awaitLog(t, u.logs, "handover channel: a peer was refused", "i/o timeout")
	u.assertAdmitting(t)
	// The channel still takes a real successor.
	helloSuccessor(t, u.name)
	if !u.s.forwarding.Load() {
		t.Fatal("not forwarding after a real successor's hello")
	}
}

// TestSuccessionSilentPeerDoesNotBlockSuccessor: a real successor that
// connects while a silent peer of the router's uid awaits its hello
// deadline takes the admission over at once.
func TestSuccessionSilentPeerDoesNotBlockSuccessor(t *testing.T) {
	u := startUnchanged(t, withHelloTimeout(2*failSafe))
	silent, err := dialHandover(context.Background(), u.name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	helloSuccessor(t, u.name)
	if !u.s.forwarding.Load() {
		t.Fatal("not forwarding after a real successor's hello")
	}
}

// TestSuccessionRefusesForeignSuccessor: a process of another uid that
// connects to the handover channel with a valid hello is closed at once,
// logged with its uid, and changes nothing.
func TestSuccessionRefusesForeignSuccessor(t *testing.T) {
	u := startUnchanged(t)
	out := foreignPeer(t, "successor", u.name)
	if got := peerLine(t, out); got != "closed" {
		t.Fatalf("the peer of another uid got %q, want the channel closed", got)
	}
	awaitLog(t, u.logs, "handover channel: a peer was refused", fmt.Sprintf("peer_uid=%d", foreignUID))
	u.assertAdmitting(t)
}

// servesUnadopted fails the test unless the router p opened its front door
// without adopting a lease and serves a request.
func servesUnadopted(t *testing.T, p routerProcess) {
	t.Helper()
	waitFor(t, p.started.opened, "the front door to open")
	if got := capacity(t, p.started.admin).Tiers[0].Active; got != 0 {
		t.Fatalf("the router holds %d leases, want none adopted", got)
	}
	if err := chat(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, p.started.front.String(), `{"model":"llama"}`); err != nil {
		t.Fatalf("a request after the refused handover: %v", err)
	}
}

// TestRunRefusesLyingPredecessor: a process of the router's uid holding
// the handover channel before the router starts, and answering its hello
// with counts past the tier's ceilings (4 here), is refused: the router
// logs it at WARN, adopts nothing and serves.
func TestRunRefusesLyingPredecessor(t *testing.T) {
	for _, count := range []int{5, 1_000_000} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			release, streaming := make(chan struct{}), make(chan struct{}, 1)
			defer close(release)
			up := fastEngine(t, release, streaming)
			dir, keys := writeConfig(t, up.URL)
			front := freeAddress(t)
			holdHandoverName(t, front, func(conn net.Conn) {
				r := bufio.NewReader(conn)
				if _, err := r.ReadString('\n'); err != nil {
					return // a check of the predecessor, without a hello.
				}
				_, _ = fmt.Fprintf(conn, `{"kind":"snapshot","counts":[{"tier":"ns/llama","member":"gpu0","count":%d}]}`+"\n", count)
				_, _ = io.Copy(io.Discard, r)
			})
			p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", front, "--admin-listen", "127.0.0.1:0",
				"--api-keys-file", keys, "--shutdown-grace", "0s")
			servesUnadopted(t, p)
			p.cancel()
			p.stopped(t)
			if logs := p.logs.String(); !strings.Contains(logs, `"level":"WARN","msg":"lease handover refused`) ||
				!strings.Contains(logs, fmt.Sprintf("%d leases", count)) {
				t.Errorf("no WARN naming the refused count; logs: %s", logs)
			}
		})
	}
}

// TestRunRefusesForeignPredecessor: a process of another uid holding the
// handover channel before the router starts, offering leases within the
// ceilings, is refused: the router adopts nothing and serves.
func TestRunRefusesForeignPredecessor(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	up := fastEngine(t, release, streaming)
	dir, keys := writeConfig(t, up.URL)
	front := freeAddress(t)
	out := foreignPeer(t, "predecessor", handoverName(front))
	if got := peerLine(t, out); got != "listening" {
		t.Fatalf("the peer printed %q", got)
	}
	p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", front, "--admin-listen", "127.0.0.1:0",
		"--api-keys-file", keys, "--shutdown-grace", "0s")
	servesUnadopted(t, p)
	p.cancel()
	p.stopped(t)
	if logs := p.logs.String(); !strings.Contains(logs, "not a router of this uid") || !strings.Contains(logs, fmt.Sprintf(`"peer_uid":%d`, foreignUID)) {
		t.Errorf("no WARN naming the peer's uid; logs: %s", logs)
	}
}

// TestRunRefusesForeignListener: a router whose front door or admin
// address another process listens on already, even with SO_REUSEPORT as
// the router's uid, refuses to start with an error naming the address,
// and serves nothing.
func TestRunRefusesForeignListener(t *testing.T) {
	for _, tt := range []struct {
		desc     string
		occupied string // "front" or "admin".
		open     func(context.Context, string) (net.Listener, error)
	}{
		{"front door, SO_REUSEPORT", "front", listen},
		{"admin, SO_REUSEPORT", "admin", listen},
		{"front door, plain", "front", func(ctx context.Context, a string) (net.Listener, error) {
			return (&net.ListenConfig{}).Listen(ctx, "tcp", a)
		}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			release, streaming := make(chan struct{}), make(chan struct{}, 1)
			defer close(release)
			up := fastEngine(t, release, streaming)
			dir, keys := writeConfig(t, up.URL)
			foreign, err := tt.open(context.Background(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = foreign.Close() }()
			front, admin := "127.0.0.1:0", "127.0.0.1:0"
			if tt.occupied == "front" {
				front = foreign.Addr().String()
			} else {
				admin = foreign.Addr().String()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := make(chan error, 1)
			go func() {
				result <- run(ctx, context.Background(), []string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", front, "--admin-listen", admin,
					"--api-keys-file", keys, "--shutdown-grace", "0s"}, io.Discard, io.Discard, func(startedRouter) { t.Error("the router started") })
			}()
			err = waitFor(t, result, "run to return")
			if !errors.Is(err, errAddressInUse) || !strings.Contains(err.Error(), foreign.Addr().String()) {
				t.Fatalf("run = %v, want an error naming %s as in use", err, foreign.Addr())
			}
		})
	}
}
