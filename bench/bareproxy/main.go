// Command bareproxy is the floor of the benchmark harness's proxy overhead
// scenario: net/http's httputil.ReverseProxy over an http.Transport, taking
// the engines in turn, with nothing of the router's (no model scan, no
// admission, no records, no metrics). What the router adds above it is its
// own work; what it shares with it is net/http's server and client and the
// kernel's.
//
//	bareproxy -listen 127.0.0.1:0 http://127.0.0.1:8001 http://127.0.0.1:8002
//
// It logs "bareproxy listening on HOST:PORT" once it accepts connections,
// and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends and returns the first error.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bareproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "HOST:PORT to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := newProxy(fs.Args())
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	fmt.Fprintf(stderr, "bareproxy listening on %s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newProxy returns a ReverseProxy that sends each request to the next of
// targets in turn, unchanged but for its URL's scheme and host.
func newProxy(targets []string) (*httputil.ReverseProxy, error) {
	if len(targets) == 0 {
		return nil, errors.New("no engine URL given")
	}
	urls := make([]*url.URL, len(targets))
	for i, t := range targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("engine URL %q: want http(s)://HOST:PORT", t)
		}
		urls[i] = u
	}
	var next atomic.Uint64
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := urls[(next.Add(1)-1)%uint64(len(urls))]
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
		},
		// Enough idle connections per engine for every client connection
		// of the saturation runs, as the router keeps them.
		Transport: &http.Transport{Proxy: nil, MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second},
		ErrorLog:  log.New(io.Discard, "", 0),
	}, nil
}
