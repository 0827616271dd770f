package reqbody

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// ModelRef is where a request body names its model (FindModel).
type ModelRef struct {
	// name is the decoded value of the last top-level "model" member, the
	// one JSON decoders read. It aliases the body unless the value is
	// written with escapes or invalid UTF-8.
	name []byte
	// start and end delimit that member's value in the body, quotes
	// included.
	start, end int
	// count is the number of top-level "model" members, of any type.
	count int
}

// Name returns the model the body names: the decoded value of its last
// top-level "model" member. It aliases the body unless the value is
// written with escapes or invalid UTF-8.
func (ref ModelRef) Name() []byte { return ref.name }

// FindModel locates the top-level "model" member of body when body is one
// valid JSON object whose last "model" member (JSON objects decode
// last-wins) is a string. It validates the whole body with json.Valid, then
// walks only the top level, so it allocates nothing unless the key or the
// value is written with escapes or invalid UTF-8.
func FindModel(body []byte) (ModelRef, bool) {
	var ref ModelRef
	if !json.Valid(body) {
		return ref, false
	}
	found := false
	if !eachMember(body, func(key []byte, start, end int) {
		if isModelKey(key) {
			ref.count++
			found = body[start] == '"'
			ref.start, ref.end = start, end
		}
	}) || !found {
		return ModelRef{}, false
	}
	name, ok := unquote(body[ref.start:ref.end])
	ref.name = name
	return ref, ok
}

// RewriteModel appends body to dst with the value of every top-level
// "model" member replaced by quoted, a JSON string, and every other byte
// kept. ref is FindModel's result for body. A body with several "model"
// members has each of them replaced, so a decoder that reads the first one
// sees the same model as one that reads the last.
func RewriteModel(dst, body []byte, ref ModelRef, quoted []byte) []byte {
	if ref.count == 1 {
		dst = append(dst, body[:ref.start]...)
		dst = append(dst, quoted...)
		return append(dst, body[ref.end:]...)
	}
	last := 0
	eachMember(body, func(key []byte, start, end int) {
		if isModelKey(key) {
			dst = append(dst, body[last:start]...)
			dst = append(dst, quoted...)
			last = end
		}
	})
	return append(dst, body[last:]...)
}

// eachMember calls fn with the quoted key and the value's span of every
// member of the top-level object of body, a document json.Valid accepted.
// It returns false when the document is not an object.
func eachMember(body []byte, fn func(key []byte, start, end int)) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(body, i)
		if body[i] == '}' {
			return true
		}
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		keyEnd := skipString(body, i)
		key := body[i:keyEnd]
		i = skipSpace(body, keyEnd)
		i = skipSpace(body, i+1) // the ':'
		valueEnd := skipValue(body, i)
		fn(key, i, valueEnd)
		i = valueEnd
	}
}

// isModelKey reports whether a quoted JSON key decodes to "model".
func isModelKey(quoted []byte) bool {
	if string(quoted) == `"model"` {
		return true
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return false
	}
	s, ok := unquote(quoted)
	return ok && string(s) == "model"
}

// unquote decodes a quoted JSON string. It returns the bytes between the
// quotes when they need no decoding, and allocates only when they do
// (escapes, or invalid UTF-8 that decoding replaces).
func unquote(quoted []byte) ([]byte, bool) {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

// The helpers below walk JSON that json.Valid accepted; they never fail.

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// RewriteSize returns the most bytes RewriteModel can write for body and
// the model quoted: len(body) plus quoted once per "model" member. It is 0
// when body needs no copy: quoted is nil, or body already names it in its
// one "model" member.
func RewriteSize(quoted, body []byte, ref ModelRef) int {
	if quoted == nil || ref.count == 1 && bytes.Equal(body[ref.start:ref.end], quoted) {
		return 0
	}
	return len(body) + ref.count*len(quoted)
}

// Quote returns s as a JSON string, with no HTML escaping: the value
// RewriteModel writes.
func Quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; invalid UTF-8 becomes U+FFFD.
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
