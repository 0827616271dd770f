//go:build !linux

package main

import (
	"context"
	"net"
)

// listen opens a plain TCP listener: handing a port over to a new router
// while the old one drains needs SO_REUSEPORT with a steering program,
// which the router implements on Linux only. Elsewhere a second router
// fails to bind a port the first one holds.
func listen(ctx context.Context, address string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", address)
}
