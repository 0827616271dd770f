package supervise

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// maxLine bounds the partial line kept while looking for the ready line:
// ready lines are a few hundred bytes, and a process that writes a longer
// line without a newline is not writing one.
const maxLine = 64 << 10

// output takes a process's standard output and error: it appends them to
// the log file, keeps their tail and hands their lines to the ready
// matcher. Only the goroutine running copyFrom writes to it.
type output struct {
	log   *os.File               // nil without a log file
	match func(line []byte) bool // nil once it accepted a line
	line  []byte                 // the partial line match has not seen
	ready chan struct{}          // closed once match accepted a line

	mu   sync.Mutex
	keep int // bytes of tail to keep
	tail []byte
}

// newOutput opens the log file of s, if any.
func newOutput(s *Spec) (*output, error) {
	o := &output{match: s.Ready, ready: make(chan struct{}), keep: s.Tail}
	if s.Log != "" {
		f, err := os.OpenFile(s.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600) //nolint:gosec // the caller's own log path.
		if err != nil {
			return nil, err
		}
		o.log = f
	}
	return o, nil
}

// copyFrom writes everything r yields until it fails (at the end of the
// output, or when closed).
func (o *output) copyFrom(r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		o.write(buf[:n])
		if err != nil {
			return
		}
	}
}

// write takes one chunk of output. A failing log file loses the chunk but
// never blocks the process.
func (o *output) write(b []byte) {
	if o.log != nil {
		_, _ = o.log.Write(b)
	}
	if o.keep > 0 {
		o.mu.Lock()
		o.tail = append(o.tail, b...)
		if len(o.tail) > 2*o.keep {
			o.tail = append(o.tail[:0], o.tail[len(o.tail)-o.keep:]...)
		}
		o.mu.Unlock()
	}
	if o.match != nil {
		o.scan(b)
	}
}

// scan hands every complete line to match until it accepts one.
func (o *output) scan(b []byte) {
	o.line = append(o.line, b...)
	for {
		i := bytes.IndexByte(o.line, '\n')
		if i < 0 {
			break
		}
		line := o.line[:i]
		o.line = o.line[i+1:]
		if o.match(line) {
			o.match, o.line = nil, nil
			close(o.ready)
			return
		}
	}
	if len(o.line) > maxLine {
		o.line = o.line[:0]
	}
}

// isReady reports whether match accepted a line.
func (o *output) isReady() bool {
	select {
	case <-o.ready:
		return true
	default:
		return false
	}
}

// String returns the kept tail.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.tail[max(0, len(o.tail)-o.keep):])
}

// close closes the log file.
func (o *output) close() {
	if o.log != nil {
		_ = o.log.Close()
	}
}
