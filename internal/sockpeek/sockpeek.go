// Package sockpeek looks at a connected socket's receive queue without
// blocking and without consuming anything: the router's member client asks
// whether an idle connection is still usable before reusing it, and
// enginesim asks whether a request's client has left. It imports only the
// standard library.
package sockpeek

// State is what a peek at a connection finds.
type State int

const (
	// Unknown means the connection is not a socket this platform can peek at.
	Unknown State = iota
	// Open means the connection is open and nothing is waiting to be read.
	Open
	// Data means bytes are waiting to be read.
	Data
	// Closed means the peer closed (end of file) or reset the connection, or it
	// is closed on this side.
	Closed
)
