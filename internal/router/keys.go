package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Bounds of a key file.
const (
	// MaxKeys bounds the keys of one file: every request is compared with
	// every key, so the bound is also a bound on that work.
	MaxKeys = 1024
	// MaxKeyLength bounds one key; real bearer tokens are far shorter, and a
	// bounded line keeps a wrong file (a binary, say) from being accepted.
	// A presented token longer than this cannot match any key.
	MaxKeyLength = 4096
	// maxKeyFileBytes bounds the key file read by LoadKeys.
	maxKeyFileBytes = MaxKeys * (MaxKeyLength + 1)
)

// Bounds of the key file poll (KeyWatch.Interval).
const (
	// DefaultKeyPollInterval is how often a key file is reread. A new file
	// is served once two consecutive reads agree, so a rotated Secret is
	// served at most two intervals after the kubelet projected it (which
	// itself takes up to a minute or more): 5 s keeps that small next to
	// the kubelet's delay while the read, a few KiB, costs nothing.
	DefaultKeyPollInterval = 5 * time.Second
	// MinKeyPollInterval keeps a misconfigured poll from spinning on the
	// file system.
	MinKeyPollInterval = 100 * time.Millisecond
	// MaxKeyPollInterval bounds how long a revoked key can keep working
	// after its Secret changed.
	MaxKeyPollInterval = 5 * time.Minute
)

// Keys is a set of bearer tokens. A request is allowed when its
// Authorization header carries one of them. Comparison is constant-time: the
// presented token and every key are compared as SHA-256 digests, and every
// key is compared on every request, so neither the matching key nor a
// matching prefix shows in the timing. The zero value allows nothing; a nil
// *Keys means authentication is off.
//
// The set of a Keys can be replaced while requests are checked (KeyWatch
// does so when the key file changes): the set is immutable and swapped
// atomically, so a check sees either the whole old set or the whole new
// one. Keys is safe for concurrent use.
type Keys struct {
	set atomic.Pointer[keySet]
}

// keySet is one immutable set of key digests.
type keySet struct {
	digests [][sha256.Size]byte
	// source is the SHA-256 of the file content the set was parsed from,
	// so that a poll can tell an unchanged file without parsing it.
	source [sha256.Size]byte
}

// ParseKeys reads one key per line. Blank lines and lines starting with "#"
// are skipped; surrounding spaces are trimmed. It returns an error wrapping
// ErrInvalidKeys, which never quotes a key, when the file holds no key, more
// than MaxKeys keys, or a key longer than MaxKeyLength or containing a space.
func ParseKeys(data []byte) (*Keys, error) {
	s, err := parseKeySet(data)
	if err != nil {
		return nil, err
	}
	k := &Keys{}
	k.set.Store(s)
	return k, nil
}

// parseKeySet is ParseKeys without the Keys around the set.
func parseKeySet(data []byte) (*keySet, error) {
	s := &keySet{source: sha256.Sum256(data)}
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
		case len(s.digests) == MaxKeys:
			return nil, fmt.Errorf("%w: more than %d keys", ErrInvalidKeys, MaxKeys)
		}
		s.digests = append(s.digests, sha256.Sum256([]byte(key)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: a line is longer than %d bytes", ErrInvalidKeys, MaxKeyLength)
	}
	if len(s.digests) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrInvalidKeys)
	}
	return s, nil
}

// LoadKeys reads a key file with ParseKeys. Errors name the file but never
// quote its content.
func LoadKeys(path string) (*Keys, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// readKeyFile reads at most maxKeyFileBytes of a key file.
func readKeyFile(path string) ([]byte, error) {
	fh, err := os.Open(path) //nolint:gosec // The operator names the file on the command line.
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot be opened", ErrInvalidKeys, path)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, maxKeyFileBytes+1))
	if err != nil || len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("%w: %s cannot be read or exceeds %d bytes", ErrInvalidKeys, path, maxKeyFileBytes)
	}
	return data, nil
}

// Len returns the number of keys.
func (k *Keys) Len() int {
	if s := k.set.Load(); s != nil {
		return len(s.digests)
	}
	return 0
}

// keyBuffers holds the buffers Allow hashes presented keys from.
var keyBuffers = sync.Pool{New: func() any { return new([MaxKeyLength]byte) }}

// Allow reports whether the request's Authorization header is "Bearer KEY"
// for one of the keys. A nil *Keys allows every request. Allow does not
// allocate.
func (k *Keys) Allow(r *http.Request) bool {
	if k == nil {
		return true
	}
	s := k.set.Load()
	if s == nil {
		return false
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok || len(token) > MaxKeyLength {
		return false // no key is longer than MaxKeyLength.
	}
	// Hash from a pooled copy: converting the string would allocate, and a
	// copy on the stack would make every serving goroutine's stack outgrow
	// 8 KiB (docs/ROUTER.md#9-performance). The copy is cleared after.
	buf := keyBuffers.Get().(*[MaxKeyLength]byte)
	n := copy(buf[:], token)
	presented := sha256.Sum256(buf[:n])
	clear(buf[:n])
	keyBuffers.Put(buf)
	match := 0
	for i := range s.digests {
		match |= subtle.ConstantTimeCompare(presented[:], s.digests[i][:])
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

// KeyReload is what KeyWatch reports after a read of the key file that
// changed something: either a new set is served (Err nil, Keys its size)
// or the file could not be used and the previous set stays (Err wraps
// ErrInvalidKeys; it names the file and never quotes its content).
type KeyReload struct {
	// Path is the key file.
	Path string
	// Keys is the number of keys now served.
	Keys int
	// Err is why the file was not used; nil when a new set was loaded.
	Err error
}

// KeyWatch keeps a Keys current with its file, for Secrets mounted by the
// kubelet, which replaces the files by swapping a symbolic link: a changed
// file replaces the set once two consecutive reads return the same content
// and it parses (ParseKeys); until then, and whenever the file is absent,
// unreadable, empty or invalid, the previous set keeps being served, so at
// every moment either the old or the new keys work. Requiring two equal
// reads keeps a file that is being written in place from being served
// half-written.
type KeyWatch struct {
	// Path is the key file.
	Path string
	// Keys is the set kept current. It must not be nil.
	Keys *Keys
	// Interval is the time between two reads of the file. Zero means
	// DefaultKeyPollInterval; otherwise it must be within
	// MinKeyPollInterval..MaxKeyPollInterval.
	Interval time.Duration
	// Clock paces the reads. Nil means the real clock.
	Clock clock.WithTicker
	// Report, when set, is told of every new set served and of every
	// failed read whose error differs from the previous read's. It is
	// called on Run's goroutine.
	Report func(KeyReload)

	// afterPoll, when set (tests only), is called after every read.
	afterPoll func()
}

// Run reads the file every interval until ctx ends, then returns nil. It
// returns an error at once, and changes nothing, when the watch is
// misconfigured.
func (w KeyWatch) Run(ctx context.Context) error {
	interval := w.Interval
	if interval == 0 {
		interval = DefaultKeyPollInterval
	}
	switch {
	case w.Keys == nil:
		return fmt.Errorf("%w: no Keys", errKeyWatch)
	case interval < MinKeyPollInterval || interval > MaxKeyPollInterval:
		return fmt.Errorf("%w: interval must be within %v..%v", errKeyWatch, MinKeyPollInterval, MaxKeyPollInterval)
	}
	clk := w.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	var p keyPoll
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			if r, ok := p.poll(w.Path, w.Keys); ok && w.Report != nil {
				w.Report(r)
			}
			if w.afterPoll != nil {
				w.afterPoll()
			}
		}
	}
}

// keyPoll is the state of a KeyWatch between two reads.
type keyPoll struct {
	pending    [sha256.Size]byte // content read last time, not yet served.
	hasPending bool
	lastErr    string // the previous read's error, reported once.
}

// poll reads the file once and swaps the set of k when its content is new,
// valid and equal to the previous read. It returns what to report, if
// anything.
func (p *keyPoll) poll(path string, k *Keys) (KeyReload, bool) {
	data, err := readKeyFile(path)
	var s *keySet
	if err == nil {
		sum := sha256.Sum256(data)
		if cur := k.set.Load(); cur != nil && cur.source == sum {
			p.hasPending, p.lastErr = false, ""
			return KeyReload{}, false // unchanged.
		}
		if s, err = parseKeySet(data); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		} else if !p.hasPending || p.pending != sum {
			p.pending, p.hasPending = sum, true
			return KeyReload{}, false // new: served if the next read agrees.
		}
	}
	p.hasPending = false
	if err != nil {
		if err.Error() == p.lastErr {
			return KeyReload{}, false
		}
		p.lastErr = err.Error()
		return KeyReload{Path: path, Keys: k.Len(), Err: err}, true
	}
	p.lastErr = ""
	k.set.Store(s)
	return KeyReload{Path: path, Keys: len(s.digests)}, true
}
