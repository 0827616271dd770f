package startlines

import (
	"bytes"
	"io"
	"sync"
)

// maxWatchedLine bounds the partial line a Watcher keeps while it looks for
// its start line: start lines are a few hundred bytes, and a process that
// writes a longer line without a newline is not writing one.
const maxWatchedLine = 64 << 10

// Watcher writes a process's output through to another writer (a log file,
// a buffer) and hands each complete line to a matcher until the matcher
// accepts one, then closes Found. It is the stdout and stderr of a process
// whose start line a program waits for.
type Watcher struct {
	mu      sync.Mutex
	out     io.Writer
	partial []byte
	match   func(line []byte) bool
	found   chan struct{}
}

// NewWatcher returns a Watcher writing to out that waits for a line match
// accepts; with a nil match, Found is never closed.
func NewWatcher(out io.Writer, match func(line []byte) bool) *Watcher {
	return &Watcher{out: out, match: match, found: make(chan struct{})}
}

// Found is closed once the matcher accepted a line.
func (w *Watcher) Found() <-chan struct{} { return w.found }

// Write implements io.Writer: p goes to the underlying writer first, and a
// write error is returned as it is.
func (w *Watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(p); err != nil {
		return 0, err
	}
	if w.match == nil {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		w.partial = w.partial[i+1:]
		if w.match(line) {
			w.match, w.partial = nil, nil
			close(w.found)
			return len(p), nil
		}
	}
	if len(w.partial) > maxWatchedLine {
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// Log is a Watcher that keeps everything the process writes in memory.
type Log struct {
	*Watcher
	buf lockedBuffer
}

// NewLog returns a Log that waits for a line match accepts; with a nil
// match, Found is never closed.
func NewLog(match func(line []byte) bool) *Log {
	l := &Log{}
	l.Watcher = NewWatcher(&l.buf, match)
	return l
}

// String returns everything written so far.
func (l *Log) String() string { return l.buf.String() }

// lockedBuffer is a bytes.Buffer safe for a writer and readers at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
