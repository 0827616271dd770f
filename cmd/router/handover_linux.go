//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// errHandoverNameTaken is returned by listenHandover when another router
// holds the channel's name: it is the predecessor.
var errHandoverNameTaken = errors.New("handover channel name taken")

// listenHandover listens on the abstract unix socket name (a leading @).
// Abstract names live in the network namespace, which both routers of a
// node share with host networking, and vanish with their socket.
func listenHandover(name string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "unix", name)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: %w", errHandoverNameTaken, err)
	}
	return ln, err
}

// dialHandover connects to the router listening on name.
func dialHandover(ctx context.Context, name string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", name)
}
