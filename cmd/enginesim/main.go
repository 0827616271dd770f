// Command enginesim runs an OpenAI-compatible inference engine simulator for
// sluice's tests, demo and benchmarks. See docs/ENGINESIM.md.
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/enginesim"
)

const (
	// defaultListen binds loopback: the simulator is a local test peer.
	defaultListen = "127.0.0.1:8001"
	// readHeaderTimeout bounds slow clients; it never limits a simulated
	// stall, which happens after the request is read.
	readHeaderTimeout = 10 * time.Second
	// shutdownGrace is how long in-flight requests may finish after SIGTERM
	// or SIGINT before their connections are closed.
	shutdownGrace = 10 * time.Second
)

// help is the program's help besides its flags.
var help = cmdline.Help{
	Name:     "enginesim",
	Synopsis: "[flags]",
	Summary: "enginesim serves an OpenAI-compatible inference API with simulated latencies, slots and\n" +
		"engine metrics (vLLM, SGLang, llama.cpp or TGI dialect), for sluice's tests, demo and benchmarks (docs/ENGINESIM.md).",
	Examples: []cmdline.Example{
		{Comment: "an engine on 127.0.0.1:8001 serving one model", Command: "enginesim --listen 127.0.0.1:8001 --model meta-llama/Llama-3.1-8B-Instruct"},
		{Comment: "a busy SGLang-flavored engine: 6 of its 8 slots held by load the router cannot see", Command: "enginesim --flavor sglang --max-num-seqs 8 --hidden-load 6"},
	},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, serves until SIGTERM or SIGINT and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := cmdline.New(help)
	fs := cmd.Flags
	cfg := enginesim.DefaultConfig()
	cfg.RegisterFlags(fs)
	listen := fs.String("listen", defaultListen, "listen address")
	var logging cmdline.Logging
	cmd.Logging(&logging)
	requestLog := fs.String("request-log", "", "append one JSON line per inference request to this file (docs/ENGINESIM.md#request-log)")
	loadTime := fs.Duration("load-time", 0, "wait this long before listening, as an engine loads its model (docs/ENGINESIM.md)")
	if err := cmd.Parse(args, stdout, stderr); err != nil {
		return cmdline.Report(help.Name, err, stderr)
	}
	switch {
	case fs.NArg() > 0:
		return cmdline.Report(help.Name, cmdline.Usagef("unexpected arguments %q", fs.Args()), stderr)
	case *loadTime < 0 || *loadTime > enginesim.MaxSimDuration:
		err := cmdline.Usagef("--load-time must be within 0..%v, got %v", enginesim.MaxSimDuration, *loadTime)
		return cmdline.Report(help.Name, err, stderr)
	}
	logger := logging.Logger(stderr)

	opts := []enginesim.Option{enginesim.WithLogger(logger)}
	if *requestLog != "" {
		// Unbuffered and appended: each line is one write, so the lines of a
		// killed engine survive it, and a restarted engine appends to them.
		f, err := os.OpenFile(*requestLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			logger.Error("cannot open the request log", "error", err)
			return 2
		}
		defer func() { _ = f.Close() }()
		opts = append(opts, enginesim.WithRequestLog(f))
	}
	if cfg.AllowFaultHeader {
		logger.Warn("per-request faults are enabled", "header", enginesim.FaultHeader)
	}
	handler, err := enginesim.NewServer(cfg, opts...)
	if err != nil {
		logger.Error("invalid configuration", "error", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *loadTime > 0 {
		// Nothing listens meanwhile: a client sees what it sees of a real
		// engine still loading, refused connections.
		logger.Info("loading the model", "load_time", loadTime.String())
		loaded := time.NewTimer(*loadTime)
		select {
		case <-loaded.C:
		case <-ctx.Done():
			loaded.Stop()
			logger.Info("stopped while loading")
			return 0
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		logger.Error("listen failed", "error", err)
		return 1
	}
	if !isLoopback(ln.Addr()) {
		logger.Warn("listening on a non-loopback address", "addr", ln.Addr().String())
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ConnContext:       enginesim.ConnContext,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("listening", "addr", ln.Addr().String(), "model", cfg.Model, "flavor", cfg.Flavor.String(),
		"max_num_seqs", cfg.MaxNumSeqs, "hidden_load", cfg.HiddenLoad)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		logger.Error("serve failed", "error", err)
		return 1
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("graceful shutdown timed out; closing connections", "error", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("serve failed", "error", err)
		return 1
	}
	return 0
}

// isLoopback reports whether a listener address is a loopback IP.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
