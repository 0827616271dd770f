package startlines

import (
	"bytes"
	"sync"
)

// Log keeps everything a process writes and hands each complete line to a
// matcher until the matcher accepts one, then closes Found. It is the
// stdout and stderr of a process whose start line a program waits for.
type Log struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	match   func(line []byte) bool
	found   chan struct{}
}

// NewLog returns a Log that waits for a line match accepts; with a nil
// match, Found is never closed.
func NewLog(match func(line []byte) bool) *Log {
	return &Log{match: match, found: make(chan struct{})}
}

// Found is closed once the matcher accepted a line.
func (l *Log) Found() <-chan struct{} { return l.found }

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if l.match == nil {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.partial[:i]
		l.partial = l.partial[i+1:]
		if l.match(line) {
			l.match, l.partial = nil, nil
			close(l.found)
			return len(p), nil
		}
	}
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
