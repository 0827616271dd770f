package apikeys

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Bounds of the key file poll (Watch.Interval).
const (
	// DefaultPollInterval is how often a key file is reread. A new file
	// is served once two consecutive reads agree, so a rotated Secret is
	// served at most two intervals after the kubelet projected it (which
	// itself takes up to a minute or more): 5 s keeps that small next to
	// the kubelet's delay while the read, a few KiB, costs nothing.
	DefaultPollInterval = 5 * time.Second
	// MinPollInterval keeps a misconfigured poll from spinning on the
	// file system.
	MinPollInterval = 100 * time.Millisecond
	// MaxPollInterval bounds how long a revoked key can keep working
	// after its Secret changed.
	MaxPollInterval = 5 * time.Minute
)

// Reload is what Watch reports after a read of the key file that
// changed something: either a new set is served (Err nil, Keys its size)
// or the file could not be used and the previous set stays (Err wraps
// ErrInvalidKeys; it names the file and never quotes its content).
type Reload struct {
	// Path is the key file.
	Path string
	// Keys is the number of keys now served.
	Keys int
	// Err is why the file was not used; nil when a new set was loaded.
	Err error
}

// Watch keeps a Keys current with its file, for Secrets mounted by the
// kubelet, which replaces the files by swapping a symbolic link: a changed
// file replaces the set once two consecutive reads return the same content
// and it parses (Parse); until then, and whenever the file is absent,
// unreadable, empty or invalid, the previous set keeps being served, so at
// every moment either the old or the new keys work. Requiring two equal
// reads keeps a file that is being written in place from being served
// half-written.
type Watch struct {
	// Path is the key file.
	Path string
	// Keys is the set kept current. It must not be nil.
	Keys *Keys
	// Interval is the time between two reads of the file. Zero means
	// DefaultPollInterval; otherwise it must be within
	// MinPollInterval..MaxPollInterval.
	Interval time.Duration
	// Clock paces the reads. Nil means the real clock.
	Clock clock.WithTicker
	// Report, when set, is told of every new set served and of every
	// failed read whose error differs from the previous read's. It is
	// called on Run's goroutine.
	Report func(Reload)
	// Polled, when set, is called on Run's goroutine after every read of
	// the file, whether or not the read changed anything, and after Report
	// for that read. A caller that steps the watch's Clock waits on it to
	// know that the read an interval triggered is done. Nil means no call.
	Polled func()
}

// Run reads the file every interval until ctx ends, then returns nil. It
// returns an error at once, and changes nothing, when the watch is
// misconfigured.
func (w Watch) Run(ctx context.Context) error {
	interval := w.Interval
	if interval == 0 {
		interval = DefaultPollInterval
	}
	switch {
	case w.Keys == nil:
		return fmt.Errorf("%w: no Keys", ErrWatch)
	case interval < MinPollInterval || interval > MaxPollInterval:
		return fmt.Errorf("%w: interval must be within %v..%v", ErrWatch, MinPollInterval, MaxPollInterval)
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
			if w.Polled != nil {
				w.Polled()
			}
		}
	}
}

// keyPoll is the state of a Watch between two reads.
type keyPoll struct {
	pending    [sha256.Size]byte // content read last time, not yet served.
	hasPending bool
	lastErr    string // the previous read's error, reported once.
}

// poll reads the file once and swaps the set of k when its content is new,
// valid and equal to the previous read. It returns what to report, if
// anything.
func (p *keyPoll) poll(path string, k *Keys) (Reload, bool) {
	data, err := readKeyFile(path)
	var s *keySet
	if err == nil {
		sum := sha256.Sum256(data)
		if cur := k.set.Load(); cur != nil && cur.source == sum {
			p.hasPending, p.lastErr = false, ""
			return Reload{}, false // unchanged.
		}
		if s, err = parseKeySet(data); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		} else if !p.hasPending || p.pending != sum {
			p.pending, p.hasPending = sum, true
			return Reload{}, false // new: served if the next read agrees.
		}
	}
	p.hasPending = false
	if err != nil {
		if err.Error() == p.lastErr {
			return Reload{}, false
		}
		p.lastErr = err.Error()
		return Reload{Path: path, Keys: k.Len(), Err: err}, true
	}
	p.lastErr = ""
	k.set.Store(s)
	return Reload{Path: path, Keys: len(s.digests)}, true
}
