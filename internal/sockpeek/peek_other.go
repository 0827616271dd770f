//go:build !unix

package sockpeek

import "net"

// Peek cannot look at a socket on this platform.
func Peek(net.Conn) State { return Unknown }

// Peeker peeks at one connection; on this platform it cannot.
type Peeker struct{}

// NewPeeker returns a Peeker of c.
func NewPeeker(net.Conn) *Peeker { return &Peeker{} }

// Peek cannot look at a socket on this platform.
func (*Peeker) Peek() State { return Unknown }
