package enginesim

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"time"
)

// FaultHeader is the request header that selects a fault for one
// generation request when Config.AllowFaultHeader is set. The router
// forwards request headers unchanged, so a test driver in front of the
// router can fault single requests (docs/ENGINESIM.md#per-request-faults).
const FaultHeader = "X-Enginesim-Fault"

// Fault is a per-request fault named by FaultHeader.
type Fault string

// The per-request faults.
const (
	// FaultNone serves the request normally.
	FaultNone Fault = ""
	// FaultResetMidBody writes half of the response (for a stream, up to
	// and including the middle token), then resets the TCP connection (RST).
	FaultResetMidBody Fault = "reset-mid-body"
	// FaultTruncateSSE writes half of the response (for a stream, up to and
	// including the middle token, without its terminal event), then aborts
	// the handler: the connection closes without ending the body.
	FaultTruncateSSE Fault = "truncate-sse"
	// FaultStall sends the response headers (a stream: its first token too),
	// then waits until the client goes away, holding its slot (a stream) —
	// an idle body for the router's idle timeout.
	FaultStall Fault = "stall"
	// FaultStallHeaders waits before any response header until the client
	// goes away, holding no slot — for the router's response header
	// timeout.
	FaultStallHeaders Fault = "stall-headers"
	// FaultEndlessHeader is a hostile member: it takes the connection over
	// and sends a 200 status line and one header line that never ends,
	// until the client closes the connection, holding no slot — for the
	// router's bound on response heads.
	FaultEndlessHeader Fault = "endless-header"
	// FaultInformationalFlood is a hostile member: it takes the connection
	// over and sends "100 Continue" responses without end, until the client
	// closes the connection, holding no slot — for the router's bound on
	// informational responses.
	FaultInformationalFlood Fault = "informational-flood"
)

// Bounds of the hostile faults.
const (
	// hostileChunk is the size of each write of a hostile fault.
	hostileChunk = 32 << 10
	// hostileLimit bounds how long a hostile fault writes to a client that
	// neither reads nor closes.
	hostileLimit = time.Minute
)

// parseFault returns the fault a request's FaultHeader names. It fails with
// ErrUnknownFault for any other value.
func parseFault(h http.Header) (Fault, error) {
	vals := h.Values(FaultHeader)
	switch {
	case len(vals) == 0:
		return FaultNone, nil
	case len(vals) > 1:
		return FaultNone, fmt.Errorf("%w: %d header values", ErrUnknownFault, len(vals))
	}
	switch f := Fault(vals[0]); f {
	case FaultResetMidBody, FaultTruncateSSE, FaultStall, FaultStallHeaders, FaultEndlessHeader, FaultInformationalFlood:
		return f, nil
	default:
		return FaultNone, ErrUnknownFault
	}
}

// resetter holds a connection taken over for FaultResetMidBody until the
// handler's bookkeeping is done: close runs last, so that the engine no
// longer counts the request when the peer sees the reset.
type resetter struct {
	conn net.Conn
}

// takeOver hijacks the request's connection after flushing what was
// written, so that close can reset it. It reports false when the connection
// cannot be hijacked (the handler then aborts instead).
func (r *resetter) takeOver(w http.ResponseWriter) bool {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return false
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return false
	}
	r.conn = conn
	return true
}

// close resets the taken-over connection: SO_LINGER 0 makes close send RST
// instead of FIN.
func (r *resetter) close() {
	if r.conn == nil {
		return
	}
	if tc, ok := r.conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = r.conn.Close()
}

// abortMidBody ends a response halfway for FaultResetMidBody (reset) and
// FaultTruncateSSE (abort without ending the body). It never returns for a
// truncation, nor for a reset whose connection cannot be taken over.
func (r *resetter) abortMidBody(w http.ResponseWriter, f Fault) {
	if f == FaultResetMidBody && r.takeOver(w) {
		return
	}
	_ = http.NewResponseController(w).Flush()
	// Deferred releases run while the panic unwinds; net/http then closes
	// the connection without ending the body.
	panic(http.ErrAbortHandler)
}

// hostileHead is what a hostile fault sends: its first bytes once, then its
// repeated chunk until the client closes the connection.
func hostileHead(f Fault) (first, chunk []byte) {
	if f == FaultEndlessHeader {
		return []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Enginesim-Pad: "),
			bytes.Repeat([]byte("x"), hostileChunk)
	}
	continued := []byte("HTTP/1.1 100 Continue\r\n\r\n")
	return nil, bytes.Repeat(continued, hostileChunk/len(continued))
}

// floodHead takes the request's connection over and writes the hostile
// fault f's bytes until a write fails (the client closed the connection)
// or hostileLimit passes, then closes it. It reports false when the
// connection cannot be taken over.
func floodHead(w http.ResponseWriter, f Fault) bool {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetWriteDeadline(time.Now().Add(hostileLimit))
	first, chunk := hostileHead(f)
	if _, err := conn.Write(first); err != nil {
		return true
	}
	for {
		if _, err := conn.Write(chunk); err != nil {
			return true
		}
	}
}
