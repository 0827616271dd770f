package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Bounds of one attempt.
const (
	// MaxInformational bounds the informational (1xx) responses read
	// before the final one, net/http's own limit: an engine has no reason
	// to send more than one. The header timeout bounds their time.
	MaxInformational = 5
	// MaxResponseHeadBytes bounds the bytes of one attempt's response
	// heads: the status lines and headers of the informational (1xx)
	// responses and of the final one, together. A member sending more
	// fails the attempt (ErrHeaderTooLarge) after the client read at most
	// this many bytes of it; net/http's client allows 10 MB, which is
	// memory enough to take a router down.
	MaxResponseHeadBytes = 64 << 10
	// inlineBodySize is the largest body copied behind the request head to
	// go out in one write; a larger one follows the head in a vectored
	// write, uncopied.
	inlineBodySize = 16 << 10
	// maxHeadScratch bounds the scratch buffer an idle connection keeps.
	maxHeadScratch = 32 << 10
)

// Request is what an Attempt sends. The client reads it, never writes it,
// and holds it until the attempt ends.
type Request struct {
	// Method is the request method.
	Method string
	// Path is the request target's path, already escaped.
	Path string
	// RawQuery is the target's query without '?'; empty sends none.
	RawQuery string
	// Header holds the request's fields, written as they are except the
	// ones the client writes or refuses itself: Host and Content-Length
	// (from the Target and Body), Expect (the body is at hand), the
	// hop-by-hop fields (Connection, Keep-Alive, Proxy-Connection,
	// Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
	// Transfer-Encoding, Upgrade) and a User-Agent with one empty value,
	// net/http's way of asking for none. Fields names too.
	Header http.Header
	// Fields replace Header's fields of the same canonical names: each is
	// written after Header with its values, and one without values is not
	// written at all. They are written as given, hop-by-hop names
	// included (TE: trailers).
	Fields []Field
	// Body is the whole request body; Content-Length is its length.
	Body []byte
	// HeaderTimeout bounds the attempt from Send until the response head
	// was read: dial, TLS handshake, write and every head, the one resend
	// included.
	HeaderTimeout time.Duration
	// IdleTimeout bounds each read of the response body.
	IdleTimeout time.Duration
}

// Field is one request header field.
type Field struct {
	// Name is the field's canonical name.
	Name string
	// Values are written in order, one line each; none omits the field.
	Values []string
}

// Head is a member's final response head.
type Head struct {
	// Status is the response's status code, 200 or above.
	Status int
	// Header holds the response's fields as the member sent them; the
	// caller may change it.
	Header http.Header
	// ContentLength is the body's length, or -1 when it is unknown (a
	// chunked or close-delimited body).
	ContentLength int64
	// Trailers is how many trailers the head announced (its Trailer
	// field); Attempt.Trailer has their values once the body was read.
	Trailers int
}

// Attempt is one request's single attempt on one connection: Send writes
// it, ReadHead reads the response head, Read reads the body and Close ends
// it. The zero value is ready for Send; an Attempt lives in the caller's
// per-request state, so an attempt allocates nothing of its own. Its
// methods must be called from one goroutine at a time; only the context
// given to Send acts from another (its cancellation makes the
// connection's blocked and later reads and writes fail at once).
type Attempt struct {
	client   *Client
	target   *Target
	req      *Request
	ctx      context.Context
	deadline time.Time // the header deadline.

	c    *conn       // nil before Send succeeds and after the attempt failed or closed.
	stop func() bool // stops the context's abort of c.
	resp *http.Response
	body io.ReadCloser // resp's own body reader.
	keep bool          // the member did not ask to close the connection.
	eof  bool          // the body was read to its end.
	sent bool          // the request was written whole on some connection.
	// armed says Wait gave the next Read its idle deadline already.
	armed bool
}

// Send writes r for t on a connection of c, an idle live one if there is
// one. It returns once the request was written (a small one on plain TCP:
// once the member's answer, or the connection's end, can be read, so the
// head's first read finds it); on failure the connection
// is closed and the error is classified: ErrNotSent (with ErrRefused or
// ErrReset) when the member cannot have seen the request, ErrReset when a
// fresh connection was reset, others as they are. A request a reused
// connection provably never delivered (nothing was written) goes out once
// more, on a fresh connection, within the same header deadline.
func (c *Client) Send(ctx context.Context, a *Attempt, t *Target, r *Request) error {
	*a = Attempt{client: c, target: t, req: r, ctx: ctx, deadline: time.Now().Add(r.HeaderTimeout)}
	cn, err := c.get(ctx, t, a.deadline)
	if err != nil {
		return err
	}
	err = a.write(cn)
	if errors.Is(err, errNotReceived) {
		return a.resend()
	}
	return err
}

// Sent reports whether the request was written whole.
func (a *Attempt) Sent() bool { return a.sent }

// resend writes the request on a freshly dialled connection.
func (a *Attempt) resend() error {
	cn, err := a.client.dial(a.ctx, a.target, a.deadline)
	if err != nil {
		return err
	}
	return a.write(cn)
}

// write writes the request on cn by the header deadline and keeps cn as
// the attempt's connection. On failure cn is closed and the error says
// whether the member provably never received the request (errNotReceived,
// only for a reused cn), a fresh cn was reset before any request byte was
// written (ErrNotSent and ErrReset) or reset after (ErrReset).
func (a *Attempt) write(cn *conn) error {
	a.stop = context.AfterFunc(a.ctx, cn.aborter())
	a.c = cn
	// Checking the context after setting a deadline closes the race with
	// abort: either abort runs later and moves the deadline to the past, or
	// the context was already cancelled and the check sees it.
	if err := cn.conn.SetDeadline(a.deadline); err != nil {
		return a.fail(err)
	}
	if err := a.ctx.Err(); err != nil {
		return a.fail(err)
	}
	if cn.reused && a.client.beforeWrite != nil {
		a.client.beforeWrite(cn.raw.LocalAddr())
	}
	if n, err := cn.writeRequest(a.req, a.target); err != nil {
		if cn.reused && n == 0 && !isTimeout(err) {
			// Not a byte left this side: the member saw nothing.
			return a.fail(fmt.Errorf("%w: %w", errNotReceived, err))
		}
		err = cn.resetError(err)
		if n == 0 && errors.Is(err, ErrReset) {
			// A fresh connection reset before its first byte: the member
			// saw nothing either.
			err = fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return a.fail(err)
	}
	a.sent = true
	return nil
}

// fail ends the attempt's connection and returns err.
func (a *Attempt) fail(err error) error {
	a.stop()
	a.c.close()
	a.c = nil
	return err
}

// ReadHead reads the response head by the header deadline, skipping at
// most MaxInformational informational responses, and returns the final
// one; its body is read with Read. On failure the connection is closed and
// the error says why: ErrClosed (the member closed the connection after
// taking the request), ErrReset (it reset a fresh connection),
// ErrSwitchingProtocols, ErrTooManyInformational, ErrHeaderTooLarge, a
// timeout, or the context's error. A reused connection the member had
// closed before the request reached it (end of file, then the socket's
// pending reset) resends the request on a fresh connection.
func (a *Attempt) ReadHead() (Head, error) {
	err := a.readHead()
	if errors.Is(err, errNotReceived) {
		if err := a.resend(); err != nil {
			return Head{}, err
		}
		err = a.readHead()
	}
	if err != nil {
		return Head{}, err
	}
	r := a.resp
	return Head{Status: r.StatusCode, Header: r.Header, ContentLength: r.ContentLength, Trailers: len(r.Trailer)}, nil
}

// Trailer returns the trailers of a body read to its end (nil without
// any): the announced ones and any other the member sent.
func (a *Attempt) Trailer() http.Header {
	if a.resp == nil {
		return nil
	}
	return a.resp.Trailer
}

// readHead reads the response head on the attempt's connection.
func (a *Attempt) readHead() error {
	cn := a.c
	if cn == nil {
		return ErrBodyClosed
	}
	cn.limit.set(MaxResponseHeadBytes)
	if _, err := cn.br.Peek(1); err != nil {
		// Not a byte of a response arrived.
		if cn.reused && errors.Is(err, io.EOF) && cn.resetAfterClose() {
			return a.fail(fmt.Errorf("%w: %w", errNotReceived, err))
		}
		if errors.Is(err, io.EOF) {
			// The member took the request and closed without answering.
			return a.fail(fmt.Errorf("%w: %w", ErrClosed, err))
		}
		return a.fail(cn.resetError(err))
	}
	resp, err := readResponse(cn.br) //nolint:bodyclose // the attempt owns the body: Read reads it, Close ends it.
	cn.limit.set(-1)
	if err != nil {
		return a.fail(err)
	}
	a.resp, a.body, a.keep = resp, resp.Body, !resp.Close
	return nil
}

// Read reads the response body; each read gets the idle timeout. A read
// that fails (the context ended, the idle deadline passed, the member
// broke the response) closes the connection before it returns, so the
// member sees the attempt end before the caller acts on the failure.
func (a *Attempt) Read(p []byte) (int, error) {
	if a.c == nil || a.body == nil {
		return 0, ErrBodyClosed
	}
	if !a.armed {
		if err := a.arm(); err != nil {
			_ = a.Close()
			return 0, err
		}
	}
	a.armed = false
	n, err := a.body.Read(p)
	if err != nil {
		a.eof = err == io.EOF
		if !a.eof {
			_ = a.Close()
		}
	}
	return n, err
}

// Wait waits until the body has bytes to read, or the connection an end
// or a failure to report, and reads nothing: a caller need not hold a
// buffer while a stream is quiet. The wait belongs to the next Read: it
// runs under that Read's idle deadline and context, and the Read finds
// whatever ended it (the connection's read failures are sticky). Wait
// returns at once when the body has ended or has no bytes to come.
func (a *Attempt) Wait() {
	if a.c == nil || a.body == nil || a.body == http.NoBody || a.eof || a.armed {
		return
	}
	if a.arm() != nil {
		return // Read arms again, and fails.
	}
	a.armed = true
	_, _ = a.c.br.Peek(1)
}

// arm gives the next read of the body the idle timeout. As in write: the
// deadline first, then the cancellation check.
func (a *Attempt) arm() error {
	if err := a.c.conn.SetReadDeadline(time.Now().Add(a.req.IdleTimeout)); err != nil {
		return err
	}
	return a.ctx.Err()
}

// Close ends the attempt: its connection goes back to the client's idle
// connections when the body was read to its end, the member allows
// keep-alive and nothing else can touch it; otherwise it is closed. Close
// is idempotent, and does nothing before Send or after a failure.
func (a *Attempt) Close() error {
	cn := a.c
	if cn == nil {
		return nil
	}
	a.c = nil
	if a.stop() && a.eof && a.keep && cn.br.Buffered() == 0 {
		a.client.put(cn)
	} else {
		cn.close()
	}
	return nil
}

// resetError marks err as the member's reset of a fresh connection before
// any response byte (ErrReset); other errors are returned as they are. A
// reset of a reused connection is not marked: a live engine's own idle
// close resets a request that reached it just before the close, so it
// says nothing about the engine's health.
func (c *conn) resetError(err error) error {
	if !c.reused && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return fmt.Errorf("%w: %w", ErrReset, err)
	}
	return err
}

// isTimeout reports whether err is a connection deadline or dial timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// skipped reports whether the client writes or refuses the request field
// name itself (Request.Header).
func skipped(name string) bool {
	switch name {
	case "Host", "Content-Length", "Expect",
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// writeRequest sends r's request line and headers for t followed by r's
// body, in one write when the body is small (send), and returns how many
// bytes the connection took.
func (c *conn) writeRequest(r *Request, t *Target) (int64, error) {
	h := c.head[:0]
	h = append(h, r.Method...)
	h = append(h, ' ')
	h = append(h, r.Path...)
	if r.RawQuery != "" {
		h = append(h, '?')
		h = append(h, r.RawQuery...)
	}
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, t.Host...)
	h = append(h, "\r\n"...)
	for k, vv := range r.Header {
		if skipped(k) || replaced(r.Fields, k) || k == "User-Agent" && len(vv) == 1 && vv[0] == "" {
			continue
		}
		h = appendField(h, k, vv)
	}
	for _, f := range r.Fields {
		h = appendField(h, f.Name, f.Values)
	}
	h = append(h, "Content-Length: "...)
	h = appendUint(h, uint64(len(r.Body)))
	h = append(h, "\r\n\r\n"...)
	var (
		n   int64
		err error
	)
	if len(r.Body) <= inlineBodySize {
		h = append(h, r.Body...)
		var w int
		w, err = c.send(h)
		n = int64(w)
	} else {
		bufs := net.Buffers{h, r.Body}
		n, err = bufs.WriteTo(c.conn)
	}
	if cap(h) <= maxHeadScratch {
		c.head = h
	}
	return n, err
}

// replaced reports whether fields name the field name.
func replaced(fields []Field, name string) bool {
	for i := range fields {
		if fields[i].Name == name {
			return true
		}
	}
	return false
}

// appendField appends one line per value of the field name.
func appendField(h []byte, name string, values []string) []byte {
	for _, v := range values {
		h = append(h, name...)
		h = append(h, ": "...)
		h = append(h, v...)
		h = append(h, "\r\n"...)
	}
	return h
}

// appendUint appends n in decimal.
func appendUint(b []byte, n uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// readResponse reads the member's response head, skipping at most
// MaxInformational informational (1xx) responses.
func readResponse(br *bufio.Reader) (*http.Response, error) {
	for range MaxInformational + 1 {
		resp, err := http.ReadResponse(br, nil)
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, ErrSwitchingProtocols
		case resp.StatusCode >= 200 || resp.StatusCode < 100:
			return resp, nil
		}
	}
	return nil, ErrTooManyInformational
}
