package router

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// modelField returns the decoded value of the top-level "model" member of
// body when body is one valid JSON object whose last "model" member (JSON
// objects decode last-wins) is a string. It validates the whole body with
// json.Valid, then walks only the top level, so it allocates nothing unless
// the key or the value is written with escapes or invalid UTF-8; the result
// then aliases body.
func modelField(body []byte) ([]byte, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i++
	var model []byte
	found := false
	for {
		i = skipSpace(body, i)
		if body[i] == '}' {
			break
		}
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		keyEnd := skipString(body, i)
		key := body[i:keyEnd]
		i = skipSpace(body, keyEnd)
		i = skipSpace(body, i+1) // the ':'
		valueEnd := skipValue(body, i)
		if isModelKey(key) {
			found = body[i] == '"'
			model = body[i:valueEnd]
		}
		i = valueEnd
	}
	if !found {
		return nil, false
	}
	return unquote(model)
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
