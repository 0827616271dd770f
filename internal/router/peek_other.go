//go:build !unix

package router

import "net"

// peerClosed cannot peek at sockets on this platform: an idle connection
// the member closed is found when the request on it fails.
func peerClosed(net.Conn) bool { return false }

// resetAfterClose cannot read a socket's pending error on this platform:
// no request is ever found unreceived by the member after it was written.
func (*memberConn) resetAfterClose() bool { return false }
