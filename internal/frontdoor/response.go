package frontdoor

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/textproto"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is the http.ResponseWriter of one request. It writes the head
// into the connection's buffered writer when the first body bytes leave,
// or at a flush or the handler's end, so that a head and the body bytes at
// hand go out in one write; it decides the framing as net/http's server
// does (docs/ROUTER.md#9-performance).
type response struct {
	c      *conn
	req    *http.Request
	seq    uint64 // the request's number on its connection (conn.armWatch).
	cancel context.CancelFunc
	// body is the request's body as the handler reads it; nil when it has
	// none. bodyv holds it, saving an allocation.
	body  *body
	bodyv body

	// header is the handler's header map; snap the head's fields when the
	// handler asked for the map again after WriteHeader, before the head
	// was sent: what it changes then goes to the trailers, not the head.
	header http.Header
	snap   http.Header
	status int
	// wroteHeader says the final status is set; headSent that the head is
	// in the connection's writer; handlerDone that the handler returned.
	wroteHeader, headSent, handlerDone bool
	// contentLength is the body's declared length, -1 when unknown;
	// written is what the handler wrote of it.
	contentLength, written int64
	chunking               bool
	// pending holds the first body bytes of a response without a
	// Content-Length until bufferBeforeChunking, the handler's end or a
	// flush, whichever comes first.
	pending *[]byte
	// trailers are the trailer fields the head declared.
	trailers []string

	// closeAfter says the connection closes after this response;
	// wantsClose that the request asked for it; wants10 that it is an
	// HTTP/1.0 request asking for keep-alive; bodyLimitHit that the
	// request's unread body was too large to drop.
	closeAfter, wantsClose, wants10, bodyLimitHit bool
	// setWriteDeadline says the handler set a write deadline, lifted after
	// the response.
	setWriteDeadline bool
	// droppedLength says WriteHeader dropped an invalid Content-Length:
	// the body is then framed as if the handler had declared one, as
	// net/http frames it (chunked, not a length of its own).
	droppedLength bool

	// expectContinue says the request asked for 100 Continue;
	// canContinue that it was not sent yet and still may be, guarded by
	// continueMu against the head's write.
	expectContinue bool
	canContinue    atomic.Bool
	continueMu     sync.Mutex
}

// pendingBuffers are the buffers of response.pending.
var pendingBuffers = sync.Pool{New: func() any { b := make([]byte, 0, bufferBeforeChunking); return &b }}

// Header returns the header map of the response.
func (w *response) Header() http.Header {
	if w.snap == nil && w.wroteHeader && !w.headSent {
		w.snap = w.header.Clone()
	}
	return w.header
}

// WriteHeader sets the response's status; an informational status (1xx
// but 101) is written at once with the header fields set so far.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.superfluous()
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < http.StatusOK && code != http.StatusSwitchingProtocols {
		if code == http.StatusContinue {
			w.disableContinue()
		}
		bw := w.c.bw
		writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
		writeFields(bw, w.header, exclLength|exclEncoding)
		_, _ = bw.WriteString("\r\n")
		_ = bw.Flush()
		return
	}
	w.wroteHeader, w.status = true, code
	if cl := w.header.Get("Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.s.logf("http: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
			w.droppedLength = true
		}
	}
}

// superfluous logs a WriteHeader after the final status, naming its
// caller, as net/http does.
func (w *response) superfluous() {
	var pc [16]uintptr
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/sluice-dev/sluice/internal/frontdoor.") || !more {
			w.c.s.logf("http: superfluous response.WriteHeader call from %s (%s:%d)", f.Function, path.Base(f.File), f.Line)
			return
		}
	}
}

// Write writes p to the body, the head first when it is not sent.
func (w *response) Write(p []byte) (int, error) {
	w.disableContinue()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.headSent {
		if w.contentLength == -1 && w.pendingLen()+len(p) <= bufferBeforeChunking {
			if w.pending == nil {
				w.pending = pendingBuffers.Get().(*[]byte)
			}
			*w.pending = append(*w.pending, p...)
			return len(p), nil
		}
		if err := w.sendHead(p); err != nil {
			return 0, err
		}
	}
	return w.writeBody(p)
}

// WriteString writes s to the body.
func (w *response) WriteString(s string) (int, error) {
	return w.Write([]byte(s))
}

// Flush sends what was written.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends what was written and returns the connection's error.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		if err := w.sendHead(nil); err != nil {
			return err
		}
	}
	return w.c.bw.Flush()
}

// SetReadDeadline sets the connection's read deadline.
func (w *response) SetReadDeadline(deadline time.Time) error {
	return w.c.rwc.SetReadDeadline(deadline)
}

// SetWriteDeadline sets the connection's write deadline, for this
// response only.
func (w *response) SetWriteDeadline(deadline time.Time) error {
	w.setWriteDeadline = true
	return w.c.rwc.SetWriteDeadline(deadline)
}

// finish ends the response once the handler returned: the head if not
// sent, the last chunk and trailers of a chunked body, then a flush.
func (w *response) finish() {
	w.handlerDone = true
	w.disableContinue()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		_ = w.sendHead(nil)
	}
	if w.chunking {
		bw := w.c.bw
		_, _ = bw.WriteString("0\r\n")
		if t := w.finalTrailers(); t != nil {
			_ = t.Write(bw)
		}
		_, _ = bw.WriteString("\r\n")
	}
	_ = w.c.bw.Flush()
	if w.body != nil {
		_ = w.body.Close()
	}
	w.putPending()
}

// sendHead writes the head into the connection's writer, and after it the
// pending body bytes; p are the body bytes about to follow, for sniffing
// a Content-Type. The framing follows net/http's server: a handler that
// ended with no Content-Length and no more than bufferBeforeChunking bytes
// gets one; an unknown length is chunked on HTTP/1.1 and closes the
// connection on HTTP/1.0; an unread request body is read and dropped up to
// maxPostHandlerReadBytes, else the connection closes.
func (w *response) sendHead(p []byte) error {
	w.headSent = true
	h := w.header
	if w.snap != nil {
		h = w.snap
	}
	if w.pending != nil {
		p = *w.pending
	}
	isHEAD := w.req.Method == http.MethodHead
	keepAlives := !w.c.s.shuttingDown.Load()
	var excl exclusions
	var extra extraFields

	trailers := false
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true
		}
	}
	for _, v := range h["Trailer"] {
		trailers = true
		foreachHeaderElement(v, w.declareTrailer)
	}
	te := h.Get("Transfer-Encoding")
	hasTE := te != ""
	declaredLength := h.Get("Content-Length") != "" || w.droppedLength

	if w.handlerDone && !trailers && !hasTE && bodyAllowedForStatus(w.status) && !declaredLength && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		extra.contentLength = strconv.AppendInt(extra.clenBuf[:0], int64(len(p)), 10)
	}
	if w.wants10 && keepAlives && declaredLength && h.Get("Connection") == "keep-alive" {
		w.closeAfter = false
	}
	hasCL := w.contentLength != -1
	if w.wants10 && (isHEAD || hasCL || !bodyAllowedForStatus(w.status)) {
		if _, set := h["Connection"]; !set {
			extra.connection = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfter = true
	}
	if h.Get("Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}
	if w.expectContinue && w.body != nil && !w.body.eof() {
		w.closeAfter = true
	}
	if w.req.ContentLength != 0 && !w.closeAfter && w.body != nil {
		switch w.body.dropRest() {
		case restTooBig:
			w.closeAfter, w.bodyLimitHit = true, true
			excl |= exclConnection
			extra.connection = "close"
		case restFailed:
			w.closeAfter = true
		}
	}

	if bodyAllowedForStatus(w.status) {
		_, haveType := h["Content-Type"]
		if !haveType && !hasTE && h.Get("Content-Encoding") == "" && len(p) > 0 {
			extra.contentType = http.DetectContentType(p)
		}
	} else {
		excl |= exclLength | exclEncoding
		if w.status == http.StatusNotModified {
			excl |= exclType
		}
	}
	if _, ok := h["Date"]; !ok {
		extra.date = time.Now().UTC().AppendFormat(extra.dateBuf[:0], http.TimeFormat)
	}
	if hasCL && hasTE && te != "identity" {
		w.c.s.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		excl |= exclLength
		hasCL = false
	}
	switch {
	case isHEAD || !bodyAllowedForStatus(w.status) || w.status == http.StatusNoContent, hasCL:
		excl |= exclEncoding
	case w.req.ProtoAtLeast(1, 1):
		if hasTE && te == "identity" {
			w.closeAfter = true
			excl |= exclEncoding
		} else {
			w.chunking = true
			extra.transferEncoding = "chunked"
			if hasTE && te == "chunked" {
				excl |= exclEncoding
			}
		}
	default:
		w.closeAfter = true
		excl |= exclEncoding
	}
	if w.chunking {
		excl |= exclLength
	}
	if w.closeAfter && (!keepAlives || !hasToken(h.Get("Connection"), "close")) {
		excl |= exclConnection
		if w.req.ProtoAtLeast(1, 1) {
			extra.connection = "close"
		}
	}

	bw := w.c.bw
	writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), w.status)
	writeFields(bw, h, excl)
	extra.write(bw)
	_, _ = bw.WriteString("\r\n")
	if w.pending != nil {
		// Written before the buffer goes back to the pool: another
		// response may take it at once.
		_, err := w.writeBody(*w.pending)
		w.putPending()
		return err
	}
	return nil
}

// writeBody writes body bytes after the head, in a chunk when chunking.
func (w *response) writeBody(p []byte) (int, error) {
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	bw := w.c.bw
	if !w.chunking {
		return bw.Write(p)
	}
	var size [16]byte
	_, _ = bw.Write(strconv.AppendInt(size[:0], int64(len(p)), 16))
	_, _ = bw.WriteString("\r\n")
	if _, err := bw.Write(p); err != nil {
		return 0, err
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}

// pendingLen returns the number of pending body bytes.
func (w *response) pendingLen() int {
	if w.pending == nil {
		return 0
	}
	return len(*w.pending)
}

// putPending gives the pending buffer back.
func (w *response) putPending() {
	if w.pending != nil {
		*w.pending = (*w.pending)[:0]
		pendingBuffers.Put(w.pending)
		w.pending = nil
	}
}

// declareTrailer records k as a trailer field the head declared.
func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if httpguts.ValidTrailerHeader(k) {
		w.trailers = append(w.trailers, k)
	}
}

// finalTrailers returns the trailer fields the handler set: those the head
// declared and those named with http.TrailerPrefix; nil when none.
func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.header {
		if kk, found := strings.CutPrefix(k, http.TrailerPrefix); found {
			if t == nil {
				t = make(http.Header)
			}
			t[kk] = vv
		}
	}
	for _, k := range w.trailers {
		for _, v := range w.header[k] {
			if t == nil {
				t = make(http.Header)
			}
			t.Add(k, v)
		}
	}
	return t
}

// reuse reports whether the connection may carry the next request.
func (w *response) reuse() bool {
	switch {
	case w.closeAfter, w.c.werr != nil:
		return false
	case w.req.Method != http.MethodHead && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written:
		return false
	case w.body != nil && w.body.closedEarly():
		return false
	}
	return true
}

// disableContinue stops a 100 Continue from being sent: the response
// began.
func (w *response) disableContinue() {
	if w.canContinue.Load() {
		w.continueMu.Lock()
		w.canContinue.Store(false)
		w.continueMu.Unlock()
	}
}

// writeContinue sends 100 Continue when the request asked for it and the
// response has not begun: the handler is reading the body.
func (w *response) writeContinue() {
	w.continueMu.Lock()
	defer w.continueMu.Unlock()
	if !w.canContinue.Load() {
		return
	}
	w.canContinue.Store(false)
	bw := w.c.bw
	_, _ = bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	_ = bw.Flush()
}

// sendExpectationFailed answers a request whose Expect the server does not
// meet, and ends its connection.
func (w *response) sendExpectationFailed() {
	w.header.Set("Connection", "close")
	w.WriteHeader(http.StatusExpectationFailed)
	w.finish()
}

// body is a request's body as the handler reads it: it sends 100 Continue
// on the first read when the request asked for it, arms the connection's
// watch at its end, and never reads on when closed.
type body struct {
	mu     sync.Mutex
	rc     io.ReadCloser // net/http's reader of the body.
	w      *response
	left   int64 // the bytes left of a Content-Length; -1 when unknown.
	sawEOF bool
	closed bool
}

// Read reads the body.
func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

// readLocked reads the body; b.mu is held.
func (b *body) readLocked(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	if b.w.canContinue.Load() {
		b.w.writeContinue()
	}
	n, err := b.rc.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if err == io.EOF { //nolint:errorlint // a body's reader returns io.EOF itself.
		b.sawEOF = true
		b.w.c.armWatch(b.w.seq)
	}
	return n, err
}

// Close stops further reads; what is left unread stays unread.
func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// eof reports whether the body was read to its end.
func (b *body) eof() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sawEOF
}

// closedEarly reports whether the handler closed the body before its end.
func (b *body) closedEarly() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed && !b.sawEOF
}

// What dropRest did with the rest of a body.
type restResult int

const (
	restDropped restResult = iota // read to its end, or nothing was left.
	restTooBig                    // more than maxPostHandlerReadBytes left.
	restFailed                    // the body was closed early or its read failed.
)

// dropRest reads and drops what the handler left of the body, up to
// maxPostHandlerReadBytes, so the connection can carry the next request.
func (b *body) dropRest() restResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.sawEOF:
		return restDropped
	case b.closed:
		return restFailed
	case b.left >= maxPostHandlerReadBytes:
		return restTooBig
	}
	_, err := io.CopyN(io.Discard, readerFunc(b.readLocked), maxPostHandlerReadBytes+1)
	switch err { //nolint:errorlint // io.CopyN returns io.EOF itself.
	case nil:
		return restTooBig
	case io.EOF:
		return restDropped
	}
	return restFailed
}

// readerFunc is a function as an io.Reader.
type readerFunc func([]byte) (int, error)

// Read calls f.
func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// bodyAllowedForStatus reports whether a response of status may have a
// body (RFC 9110 §15.2, §15.3.5, §15.4.5).
func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// exclusions are the handler's header fields the head leaves out.
type exclusions uint8

const (
	exclLength     exclusions = 1 << iota // Content-Length
	exclEncoding                          // Transfer-Encoding
	exclConnection                        // Connection
	exclType                              // Content-Type
)

// excluded reports whether the field k is left out of the head.
func (e exclusions) excluded(k string) bool {
	switch k {
	case "Content-Length":
		return e&exclLength != 0
	case "Transfer-Encoding":
		return e&exclEncoding != 0
	case "Connection":
		return e&exclConnection != 0
	case "Content-Type":
		return e&exclType != 0
	}
	return strings.HasPrefix(k, http.TrailerPrefix)
}

// extraFields are the header fields the server adds to a head.
type extraFields struct {
	contentType      string
	connection       string
	transferEncoding string
	date             []byte
	contentLength    []byte
	dateBuf          [len(http.TimeFormat)]byte
	clenBuf          [20]byte
}

// write writes the fields that are set.
func (e *extraFields) write(bw *bufio.Writer) {
	for _, f := range [...]struct {
		name  string
		value string
	}{{"Content-Type", e.contentType}, {"Connection", e.connection}, {"Transfer-Encoding", e.transferEncoding}} {
		if f.value != "" {
			_, _ = bw.WriteString(f.name)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(f.value)
			_, _ = bw.WriteString("\r\n")
		}
	}
	if e.date != nil {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(e.date)
		_, _ = bw.WriteString("\r\n")
	}
	if e.contentLength != nil {
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(e.contentLength)
		_, _ = bw.WriteString("\r\n")
	}
}

// writeStatusLine writes the status line of code.
func writeStatusLine(bw *bufio.Writer, is11 bool, code int) {
	if is11 {
		_, _ = bw.WriteString("HTTP/1.1 ")
	} else {
		_, _ = bw.WriteString("HTTP/1.0 ")
	}
	var num [3]byte
	if text := http.StatusText(code); text != "" {
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
		_ = bw.WriteByte(' ')
		_, _ = bw.WriteString(text)
		_, _ = bw.WriteString("\r\n")
		return
	}
	c := strconv.AppendInt(num[:0], int64(code), 10)
	_, _ = bw.Write(c)
	_, _ = bw.WriteString(" status code ")
	_, _ = bw.Write(c)
	_, _ = bw.WriteString("\r\n")
}

// maxSortedFields is how many field names writeFields sorts without
// allocating.
const maxSortedFields = 16

// writeFields writes h's fields but the excluded ones, sorted by name as
// net/http writes them, each value with its line breaks made spaces and
// trimmed.
func writeFields(bw *bufio.Writer, h http.Header, excl exclusions) {
	var names [maxSortedFields]string
	keys := names[:0]
	for k := range h {
		if !excl.excluded(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue // as net/http: a handler's invalid name is dropped.
		}
		for _, v := range h[k] {
			if strings.ContainsAny(v, "\r\n") {
				v = newlinesToSpaces.Replace(v)
			}
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(textproto.TrimString(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
}

// newlinesToSpaces makes each CR and LF of a field value a space.
var newlinesToSpaces = strings.NewReplacer("\n", " ", "\r", " ")

// foreachHeaderElement calls fn with each comma-separated element of v,
// trimmed, empty ones left out.
func foreachHeaderElement(v string, fn func(string)) {
	for f := range strings.SplitSeq(v, ",") {
		if f = textproto.TrimString(f); f != "" {
			fn(f)
		}
	}
}
