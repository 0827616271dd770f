//go:build !unix

package sockpeek

import "net"

// Peek cannot look at a socket on this platform.
func Peek(net.Conn) State { return Unknown }
