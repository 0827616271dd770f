//go:build !unix

package upstream

// resetAfterClose cannot read a socket's pending error on this platform:
// no request is ever found unreceived by the member after it was written.
func (*conn) resetAfterClose() bool { return false }
