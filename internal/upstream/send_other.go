//go:build !unix

package upstream

// sendOp is unused on this platform.
type sendOp struct{}

// send writes b, a whole request, with the connection's Write.
func (c *conn) send(b []byte) (int, error) { return c.conn.Write(b) }
