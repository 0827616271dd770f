package sse

// Fields selects the JSON keys whose values are generated content, by the
// OpenAI route whose responses a Content scanner reads.
type Fields uint8

// The Fields values.
const (
	// ChatFields: /v1/chat/completions, whose chunks carry a message's
	// "content", "reasoning_content", "reasoning" (strings) or "tool_calls"
	// (a list).
	ChatFields Fields = iota + 1
	// CompletionFields: /v1/completions, whose chunks carry "text".
	CompletionFields
	// ResponseFields: /v1/responses, whose delta events carry "delta".
	ResponseFields
)

// Usage is the token counts of a response's usage object.
type Usage struct {
	// Prompt is "prompt_tokens" ("input_tokens" in the Responses API).
	Prompt int64
	// Completion is "completion_tokens" ("output_tokens").
	Completion int64
}

// valueKind is what a matched key's value means.
type valueKind uint8

const (
	kindNone       valueKind = iota
	kindText                 // a non-empty string is content.
	kindList                 // a non-empty list is content.
	kindPrompt               // a number: the prompt's token count.
	kindCompletion           // a number: the completion's token count.
)

// maxKey is the length of the longest key looked for
// ("reasoning_content", "completion_tokens").
const maxKey = 17

// tooLong marks a string that is no key looked for.
const tooLong = maxKey + 1

// maxCount bounds a token count, far above any real one, so that its
// digits never overflow.
const maxCount = 1 << 40

// phase is where a Content scanner is outside strings.
type phase uint8

const (
	// seek: looking for the next string.
	seek phase = iota
	// colon: a key looked for ended; a colon makes it a key.
	colon
	// value: after a key's colon, before its value.
	value
	// listStart: after a content list's "[", before its first element.
	listStart
	// number: reading a token count's digits.
	number
)

// Content finds the generated content and the token usage in an
// OpenAI-compatible response body as it is relayed, in any chunking, with
// constant state and without allocating: it never buffers a line or a
// value, only a key's first bytes. It follows JSON strings (escapes
// included), so that text inside a string value is never taken for a key.
//
// In an event stream (Lines) each line is a unit: Write counts the lines
// in which it found content, and a line break resets the JSON state, since
// a JSON text in a data line holds no raw line break. A value is content
// when it is a non-empty string (or list, for "tool_calls") under one of
// the route's content keys: a chat stream's first chunk, which carries the
// role and an empty content, is not. The usage counts are the last ones
// seen, so a stream that repeats cumulative usage in every chunk reports
// its final counts. The zero value finds nothing; use NewContent.
type Content struct {
	fields Fields
	lines  bool

	inString bool
	escaped  bool
	// first: the string is a content value whose first byte decides.
	first  bool
	key    [maxKey]byte
	keyLen uint8 // tooLong: not a key looked for.

	phase phase
	kind  valueKind
	num   int64

	counted bool // the current line's content was counted.
	usage   Usage
	found   bool // a usage count was read.
}

// NewContent returns a scanner of a response of the route fields selects;
// lines is true for an event stream.
func NewContent(fields Fields, lines bool) Content {
	return Content{fields: fields, lines: lines}
}

// Usage returns the last token counts seen and whether any was.
func (c *Content) Usage() (Usage, bool) { return c.usage, c.found }

// Write scans p, the body's next bytes, and returns the number of lines in
// which it found content for the first time in p (an event stream's
// content events; 0 or 1 for a body that is not one). It does not keep p.
func (c *Content) Write(p []byte) int {
	n := 0
	for i := 0; i < len(p); i++ {
		if !c.inString {
			if c.phase == seek {
				j := c.nextSpecial(p[i:])
				if j < 0 {
					return n
				}
				i += j
			}
			n += c.outside(p[i])
			continue
		}
		if c.escaped {
			c.escaped = false // the escaped byte.
			continue
		}
		if c.first {
			c.first = false
			if b := p[i]; b != '"' && (!c.lines || b != '\n' && b != '\r') {
				n += c.content() // a non-empty content string.
			}
		}
		j := c.stringSpecial(p[i:])
		if j < 0 {
			c.keyBytes(p[i:])
			return n
		}
		c.keyBytes(p[i : i+j])
		i += j
		switch p[i] {
		case '"':
			c.inString = false
			c.stringEnd()
		case '\\':
			c.escaped, c.keyLen = true, tooLong
		default: // a line break: the JSON text was cut.
			c.lineEnd()
		}
	}
	return n
}

// stringSpecial returns the index of the next byte that matters in a
// string: a quote, a backslash, or a line break in an event stream; -1
// when p holds none. Strings are short, so a plain loop beats a search.
func (c *Content) stringSpecial(p []byte) int {
	for i, b := range p {
		switch b {
		case '"', '\\':
			return i
		case '\n', '\r':
			if c.lines {
				return i
			}
		}
	}
	return -1
}

// keyBytes takes a string's bytes while they may still be a key looked
// for.
func (c *Content) keyBytes(span []byte) {
	if c.keyLen == tooLong {
		return
	}
	if int(c.keyLen)+len(span) > maxKey {
		c.keyLen = tooLong
		return
	}
	copy(c.key[c.keyLen:], span)
	c.keyLen += uint8(len(span)) //nolint:gosec // at most maxKey.
}

// nextSpecial returns the index of the next byte that matters while
// seeking a string: a quote, or a line break in an event stream; -1 when
// p holds none. What lies between a body's strings is short.
func (c *Content) nextSpecial(p []byte) int {
	for i, b := range p {
		switch b {
		case '"':
			return i
		case '\n', '\r':
			if c.lines {
				return i
			}
		}
	}
	return -1
}

// outside takes one byte outside strings and returns 1 when it completed
// the line's first content.
func (c *Content) outside(b byte) int {
	if c.lines && (b == '\n' || b == '\r') {
		c.lineEnd()
		return 0
	}
	switch c.phase {
	case colon:
		switch {
		case isSpace(b):
			return 0
		case b == ':':
			c.phase = value
			return 0
		}
		c.phase = seek // the string was a value, not a key.
	case value:
		if isSpace(b) {
			return 0
		}
		kind := c.kind
		c.phase = seek
		switch {
		case kind == kindText && b == '"':
			c.startString(true)
			return 0
		case kind == kindList && b == '[':
			c.phase = listStart
			return 0
		case (kind == kindPrompt || kind == kindCompletion) && b >= '0' && b <= '9':
			c.phase, c.num = number, int64(b-'0')
			return 0
		}
	case listStart:
		if isSpace(b) {
			return 0
		}
		c.phase = seek
		if b != ']' {
			n := c.content()
			return n + c.outside(b)
		}
		return 0
	case number:
		if b >= '0' && b <= '9' {
			c.num = min(c.num*10+int64(b-'0'), maxCount)
			return 0
		}
		c.endNumber()
	}
	if c.phase == seek && b == '"' {
		c.startString(false)
	}
	return 0
}

// startString takes a string's opening quote; content says it is a content
// key's value.
func (c *Content) startString(content bool) {
	c.inString, c.escaped, c.first = true, false, content
	c.keyLen = 0
	if content {
		c.keyLen = tooLong
	}
}

// stringEnd takes a string's closing quote: a key looked for waits for its
// colon.
func (c *Content) stringEnd() {
	c.phase = seek
	if c.keyLen == tooLong {
		return
	}
	if k := c.keyKind(c.key[:c.keyLen]); k != kindNone {
		c.phase, c.kind = colon, k
	}
}

// keyKind returns what the value of key means on the scanner's route.
func (c *Content) keyKind(key []byte) valueKind {
	switch string(key) {
	case "prompt_tokens", "input_tokens":
		return kindPrompt
	case "completion_tokens", "output_tokens":
		return kindCompletion
	}
	switch c.fields {
	case ChatFields:
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			return kindText
		case "tool_calls":
			return kindList
		}
	case CompletionFields:
		if string(key) == "text" {
			return kindText
		}
	case ResponseFields:
		if string(key) == "delta" {
			return kindText
		}
	}
	return kindNone
}

// content notes content in the current line and returns 1 when it is the
// line's first.
func (c *Content) content() int {
	if c.counted {
		return 0
	}
	c.counted = true
	return 1
}

// endNumber stores a token count whose digits ended.
func (c *Content) endNumber() {
	if c.kind == kindPrompt {
		c.usage.Prompt = c.num
	} else {
		c.usage.Completion = c.num
	}
	c.found = true
	c.phase = seek
}

// lineEnd ends an event stream's line: the next one is a new unit with a
// new JSON text.
func (c *Content) lineEnd() {
	if c.phase == number {
		c.endNumber()
	}
	c.inString, c.escaped, c.first = false, false, false
	c.phase, c.counted = seek, false
}

// isSpace reports JSON whitespace (line breaks in an event stream end the
// line before this is asked).
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
