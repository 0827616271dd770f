package router

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Bounds of a key file.
const (
	// MaxKeys bounds the keys of one file: every request is compared with
	// every key, so the bound is also a bound on that work.
	MaxKeys = 1024
	// MaxKeyLength bounds one key; real bearer tokens are far shorter, and a
	// bounded line keeps a wrong file (a binary, say) from being accepted.
	MaxKeyLength = 4096
	// maxKeyFileBytes bounds the key file read by LoadKeys.
	maxKeyFileBytes = MaxKeys * (MaxKeyLength + 1)
)

// Keys is a set of bearer tokens. A request is allowed when its
// Authorization header carries one of them. Comparison is constant-time: the
// presented token and every key are compared as SHA-256 digests, and every
// key is compared on every request, so neither the matching key nor a
// matching prefix shows in the timing. The zero value allows nothing; a nil
// *Keys means authentication is off. Keys is immutable and safe for
// concurrent use.
type Keys struct {
	digests [][sha256.Size]byte
}

// ParseKeys reads one key per line. Blank lines and lines starting with "#"
// are skipped; surrounding spaces are trimmed. It returns an error wrapping
// ErrInvalidKeys, which never quotes a key, when the file holds no key, more
// than MaxKeys keys, or a key longer than MaxKeyLength or containing a space.
func ParseKeys(data []byte) (*Keys, error) {
	k := &Keys{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxKeyLength+1)
	for line := 1; sc.Scan(); line++ {
		key := strings.TrimSpace(sc.Text())
		switch {
		case key == "" || strings.HasPrefix(key, "#"):
			continue
		case len(key) > MaxKeyLength:
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInvalidKeys, line, MaxKeyLength)
		case strings.ContainsAny(key, " \t"):
			return nil, fmt.Errorf("%w: line %d contains a space", ErrInvalidKeys, line)
		case len(k.digests) == MaxKeys:
			return nil, fmt.Errorf("%w: more than %d keys", ErrInvalidKeys, MaxKeys)
		}
		k.digests = append(k.digests, sha256.Sum256([]byte(key)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: a line is longer than %d bytes", ErrInvalidKeys, MaxKeyLength)
	}
	if len(k.digests) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrInvalidKeys)
	}
	return k, nil
}

// LoadKeys reads a key file with ParseKeys. Errors name the file but never
// quote its content.
func LoadKeys(path string) (*Keys, error) {
	fh, err := os.Open(path) //nolint:gosec // The operator names the file on the command line.
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot be opened", ErrInvalidKeys, path)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, maxKeyFileBytes+1))
	if err != nil || len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("%w: %s cannot be read or exceeds %d bytes", ErrInvalidKeys, path, maxKeyFileBytes)
	}
	k, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.digests) }

// Allow reports whether the request's Authorization header is "Bearer KEY"
// for one of the keys. A nil *Keys allows every request.
func (k *Keys) Allow(r *http.Request) bool {
	if k == nil {
		return true
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	presented := sha256.Sum256([]byte(token))
	match := 0
	for i := range k.digests {
		match |= subtle.ConstantTimeCompare(presented[:], k.digests[i][:])
	}
	return match == 1
}

// bearer extracts the token of a "Bearer TOKEN" credential; the scheme is
// case-insensitive.
func bearer(header string) (string, bool) {
	const prefix = "Bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(header[len(prefix):]), true
}
