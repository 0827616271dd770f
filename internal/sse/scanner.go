// Package sse checks the framing of a server-sent event stream as it is
// relayed, the way the OpenAI API frames its streams: every non-blank line
// is a comment (":" first) or "field:value" with field data, event, id or
// retry; every data payload is "[DONE]" or a JSON object ("{" after
// optional spaces; the JSON itself is not parsed); nothing but blank lines
// and comments follows "data: [DONE]"; and the stream ends after it.
//
// A Scanner is fed the stream's bytes chunk by chunk, in any chunking, and
// keeps constant state: it never buffers a line, only the field name's
// first bytes, the position in a "[DONE]" match and a few flags. It does
// not allocate. Lines end with CRLF, LF or CR, as the event-stream format
// allows; a final line without a terminator counts as a line when End is
// called.
package sse

import "bytes"

// Verdict is how a stream's framing ended.
type Verdict uint8

// The Verdict values, in the order they are reported: Malformed wins over
// Truncated.
const (
	// Complete means every line was well framed and "data: [DONE]" was
	// seen.
	Complete Verdict = iota
	// Truncated means every line was well framed but the stream ended
	// without "data: [DONE]".
	Truncated
	// Malformed means a line broke the framing.
	Malformed
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Complete:
		return "complete"
	case Truncated:
		return "truncated"
	case Malformed:
		return "malformed"
	}
	return "unknown"
}

// done is the data payload that ends an OpenAI stream.
const done = "[DONE]"

// maxField is the length of the longest field name (event, retry).
const maxField = 5

// state is where in a line the scanner is.
type state uint8

// The scanner's states.
const (
	// lineStart: no byte of the current line was seen.
	lineStart state = iota
	// inField: reading the field name, before its colon.
	inField
	// dataSpace: after "data:", skipping the payload's leading spaces.
	dataSpace
	// inDone: matching the payload against "[DONE]".
	inDone
	// skipLine: the rest of the line does not matter (a comment, a JSON
	// payload, the value of event, id or retry).
	skipLine
	// broken: the framing is broken; nothing is looked at any more.
	broken
)

// Scanner checks an event stream's framing incrementally. The zero value is
// ready for a stream's first byte. It is not safe for concurrent use.
type Scanner struct {
	field [maxField]byte // the current line's field name so far.
	n     uint8          // bytes in field, or of "[DONE]" matched.
	state state
	cr    bool // the previous byte was a CR: an LF right after it ends no line.
	done  bool // a "data: [DONE]" line was seen.
}

// Write scans p, the stream's next bytes. It never fails and does not keep
// p.
func (s *Scanner) Write(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.state == broken {
			return
		}
		b := p[i]
		if s.cr {
			s.cr = false
			if b == '\n' {
				continue // the LF of a CRLF.
			}
		}
		if s.state == skipLine {
			// The bulk of a stream: jump to the line's end.
			j := lineEnd(p[i:])
			if j < 0 {
				return
			}
			i += j
			b = p[i]
		}
		if b == '\n' || b == '\r' {
			s.endLine()
			s.cr = b == '\r'
			continue
		}
		s.byte(b)
	}
}

// End finishes the stream (the last line counts even without its
// terminator) and returns its verdict. The Scanner is then ready for a new
// stream.
func (s *Scanner) End() Verdict {
	s.endLine()
	v := s.Verdict()
	*s = Scanner{}
	return v
}

// Verdict returns the verdict on the lines ended so far, were the stream
// to end now.
func (s *Scanner) Verdict() Verdict {
	switch {
	case s.state == broken:
		return Malformed
	case !s.done:
		return Truncated
	}
	return Complete
}

// byte takes one byte of a line that is not its terminator.
func (s *Scanner) byte(b byte) {
	switch s.state {
	case lineStart:
		if b == ':' {
			s.state = skipLine // a comment.
			return
		}
		s.field[0], s.n, s.state = b, 1, inField
	case inField:
		if b == ':' {
			s.fieldEnd()
			return
		}
		if s.n == maxField {
			s.state = broken // longer than any field name.
			return
		}
		s.field[s.n] = b
		s.n++
	case dataSpace:
		switch b {
		case ' ':
		case '{':
			s.state = skipLine // a JSON object; it is not parsed.
		case done[0]:
			s.n, s.state = 1, inDone
		default:
			s.state = broken
		}
	case inDone:
		if int(s.n) < len(done) && b == done[s.n] {
			s.n++
			return
		}
		s.state = broken
	}
}

// fieldEnd takes the colon after a field name.
func (s *Scanner) fieldEnd() {
	name := s.field[:s.n]
	switch {
	case s.done:
		s.state = broken // a field after [DONE].
	case string(name) == "data":
		s.state = dataSpace
	case string(name) == "event", string(name) == "id", string(name) == "retry":
		s.state = skipLine
	default:
		s.state = broken
	}
}

// endLine takes the end of a line.
func (s *Scanner) endLine() {
	switch s.state {
	case lineStart, skipLine:
		s.state = lineStart
	case inDone:
		if int(s.n) != len(done) {
			s.state = broken
			return
		}
		s.done, s.state = true, lineStart
	case inField, dataSpace:
		s.state = broken // no colon, or an empty data payload.
	}
}

// lineEnd returns the index of p's first CR or LF, or -1.
func lineEnd(p []byte) int {
	lf := bytes.IndexByte(p, '\n')
	head := p
	if lf >= 0 {
		head = p[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		return cr
	}
	return lf
}
