//go:build !unix

package enginesim

import "net"

// peerClosed cannot peek at a socket on this platform: a request then counts
// until its handler returns or its context ends.
func peerClosed(net.Conn) bool { return false }
