//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sluice-dev/sluice/internal/supervise"
)

// haproxyOptions describe the HAProxy instance of a scenario.
type haproxyOptions struct {
	// Listen is the frontend's HOST:PORT.
	Listen string
	// MaxConn is every server's maxconn, the router member ceiling.
	MaxConn int
	// Engines are the servers, named m0, m1, … in order.
	Engines []*engine
	// NoDelay sets `option http-no-delay`, so streamed tokens are forwarded
	// at once rather than coalesced.
	NoDelay bool
}

// haproxyConfig renders the configuration: an HTTP frontend on loopback and
// one leastconn backend whose servers each take at most MaxConn
// connections (the rest queue in HAProxy). Connections to the servers are
// kept alive, as the router's are.
func haproxyConfig(o haproxyOptions) string {
	var b strings.Builder
	b.WriteString("global\n    maxconn 4096\n\n")
	b.WriteString("defaults\n    mode http\n    timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n    timeout queue 120s\n\n")
	fmt.Fprintf(&b, "frontend fe\n    bind %s\n    default_backend be\n\n", o.Listen)
	b.WriteString("backend be\n    balance leastconn\n")
	if o.NoDelay {
		b.WriteString("    option http-no-delay\n")
	}
	for i, e := range o.Engines {
		fmt.Fprintf(&b, "    server m%d %s maxconn %d\n", i, e.addr, o.MaxConn)
	}
	return b.String()
}

// haproxyProc is one running HAProxy, or the bare proxy.
type haproxyProc struct {
	proc *supervise.Process
	addr string
}

// url returns HAProxy's OpenAI API root.
func (h *haproxyProc) url() string { return "http://" + h.addr + "/v1" }

// startHAProxy writes the configuration into dir, checks it with
// `haproxy -c` and starts HAProxy in the foreground.
func (s *supervisor) startHAProxy(bin, name, dir string, o haproxyOptions) (*haproxyProc, error) {
	addr, err := freeLoopbackAddr(s.ctx)
	if err != nil {
		return nil, err
	}
	o.Listen = addr
	cfg := filepath.Join(dir, name+".cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(o)), 0o600); err != nil {
		return nil, err
	}
	if _, err := s.runTool(s.ctx, name+"-check", bin, "-c", "-f", cfg); err != nil {
		return nil, err
	}
	p, err := s.start(name, bin, nil, "-db", "-f", cfg)
	if err != nil {
		return nil, err
	}
	if err := supervise.WaitTCP(s.ctx, addr, startTimeout); err != nil {
		return nil, fmt.Errorf("%s accepting connections on %s: %w", name, addr, err)
	}
	return &haproxyProc{proc: p, addr: addr}, nil
}

// bareProxyName is the bare proxy's row: the floor of a plain net/http
// proxy, measured in the same rounds as the router.
const bareProxyName = "net/http ReverseProxy (floor)"

// bareProxyStarted matches bareproxy's start line.
var bareProxyStarted = regexp.MustCompile(`^bareproxy listening on (127\.0\.0\.1:\d+)$`)

// startBareProxy starts bench/bareproxy in front of the engines, taking
// them in turn.
func (s *supervisor) startBareProxy(bin, name string, engines []*engine) (*haproxyProc, error) {
	args := []string{"-listen", "127.0.0.1:0"}
	for _, e := range engines {
		args = append(args, e.url())
	}
	var addr string
	p, err := s.start(name, bin, func(line []byte) bool {
		m := bareProxyStarted.FindSubmatch(line)
		if m != nil {
			addr = string(m[1])
		}
		return m != nil
	}, args...)
	if err != nil {
		return nil, err
	}
	return &haproxyProc{proc: p, addr: addr}, nil
}
