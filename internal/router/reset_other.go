//go:build !unix

package router

// resetAfterClose cannot read a socket's pending error on this platform:
// no request is ever found unreceived by the member after it was written.
func (*memberConn) resetAfterClose() bool { return false }
