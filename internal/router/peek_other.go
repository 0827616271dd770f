//go:build !unix

package router

import "net"

// peerClosed cannot peek at sockets on this platform: an idle connection
// the member closed is found when the request on it fails.
func peerClosed(net.Conn) bool { return false }
