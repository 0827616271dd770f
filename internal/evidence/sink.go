package evidence

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Bounds of the JSONL file sink.
const (
	// DefaultFileMaxBytes is the size at which the file is rotated: 64 MiB
	// is a few hundred thousand records, hours of a busy router, and two
	// such files bound the sink's disk use.
	DefaultFileMaxBytes = 64 << 20
	// DefaultQueueSize is the sink's default queue length: about a second
	// of a busy router's records, so a slow disk drops records rather than
	// slowing requests.
	DefaultQueueSize = 1024
	// MaxQueueSize bounds the queue: a queued record is a few hundred bytes.
	MaxQueueSize = 1 << 16
	// fileMode keeps the file private to the router's user: records carry
	// request ids.
	fileMode = 0o600
	// writeBufferSize is the writer's buffer; it is flushed whenever the
	// queue runs empty.
	writeBufferSize = 64 << 10
)

// FileSinkOptions configures a FileSink.
type FileSinkOptions struct {
	// Path is the JSONL file; records are appended to it. Required.
	Path string
	// MaxBytes is the size above which the file is renamed to Path+".1"
	// (replacing any previous one) and a new file started. Zero means
	// DefaultFileMaxBytes.
	MaxBytes int64
	// QueueSize is how many records may wait for the writer, 1..MaxQueueSize.
	// Zero means DefaultQueueSize.
	QueueSize int
	// BeforeWrite, when set, is called on the writer goroutine before each
	// record is written. While it runs the writer holds that record, so
	// later records wait in the queue and are dropped once it is full; a
	// caller that needs the writer at a known point (a full queue, a file
	// replaced under it) blocks it there. Nil means no call.
	BeforeWrite func()
}

// SinkDrops counts the records a FileSink did not write.
type SinkDrops struct {
	// QueueFull counts records dropped because the queue was full.
	QueueFull uint64
	// WriteError counts records the writer failed to write or flush.
	WriteError uint64
	// Closed counts records enqueued after Close.
	Closed uint64
}

// FileSink appends records to a JSONL file, one Record.AppendJSON line
// each, from one writer goroutine. Enqueue never blocks: a full queue drops
// the record and counts it. The file is rotated at MaxBytes, keeping one
// previous file. Close stops the writer after it wrote what was queued.
// Create one with OpenFileSink; all methods are safe for concurrent use.
type FileSink struct {
	path     string
	maxBytes int64
	queue    chan Record
	stop     chan struct{}
	done     chan struct{} // closed when the writer goroutine has returned.

	mu     sync.RWMutex // Enqueue holds it shared, Close exclusively.
	closed bool

	queueFull  atomic.Uint64
	writeError atomic.Uint64
	afterClose atomic.Uint64
	written    atomic.Uint64

	// Owned by the writer goroutine.
	file     *os.File
	w        *bufio.Writer
	size     int64
	line     []byte
	closeErr error

	// beforeWrite is FileSinkOptions.BeforeWrite; nil calls nothing.
	beforeWrite func()
}

// OpenFileSink opens (or creates) the file and starts the writer. Errors
// wrap ErrInvalidSink for unusable options, or are the file's open error.
func OpenFileSink(opts FileSinkOptions) (*FileSink, error) {
	if opts.Path == "" || opts.MaxBytes < 0 || opts.QueueSize < 0 || opts.QueueSize > MaxQueueSize {
		return nil, ErrInvalidSink
	}
	s := &FileSink{
		path:     opts.Path,
		maxBytes: opts.MaxBytes,
		queue:    make(chan Record, opts.QueueSize),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		line:     make([]byte, 0, 1024),

		beforeWrite: opts.BeforeWrite,
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultFileMaxBytes
	}
	if opts.QueueSize == 0 {
		s.queue = make(chan Record, DefaultQueueSize)
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	go s.run()
	return s, nil
}

// Enqueue queues r for the writer without blocking; when the queue is full
// or the sink is closed the record is dropped and counted. The record's
// Scheduler payload is shared with the writer and must not be changed.
func (s *FileSink) Enqueue(r Record) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.afterClose.Add(1)
		return
	}
	select {
	case s.queue <- r:
	default:
		s.queueFull.Add(1)
	}
}

// Drops returns the counts of records not written.
func (s *FileSink) Drops() SinkDrops {
	return SinkDrops{QueueFull: s.queueFull.Load(), WriteError: s.writeError.Load(), Closed: s.afterClose.Load()}
}

// Written returns the number of records written to the file's buffer.
func (s *FileSink) Written() uint64 { return s.written.Load() }

// Close stops accepting records, waits for the writer to write what was
// queued, flush and close the file, and returns the error of that last
// flush or close. Only the first call has an effect; later calls return
// nil at once.
func (s *FileSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	return s.closeErr
}

// run is the writer goroutine: it writes queued records, flushing whenever
// the queue runs empty, until Close.
func (s *FileSink) run() {
	defer close(s.done)
	for {
		select {
		case r := <-s.queue:
			s.write(&r)
			s.drain()
			s.flush()
		case <-s.stop:
			s.drain() // Close set closed first: nothing more arrives.
			s.flush()
			if s.file != nil {
				s.closeErr = s.file.Close()
				s.file = nil
			}
			return
		}
	}
}

// drain writes the records already queued, without waiting for more.
func (s *FileSink) drain() {
	for {
		select {
		case r := <-s.queue:
			s.write(&r)
		default:
			return
		}
	}
}

// write appends one record's line, rotating the file first when the line
// would take it past maxBytes.
func (s *FileSink) write(r *Record) {
	if s.beforeWrite != nil {
		s.beforeWrite()
	}
	line, err := r.AppendJSON(s.line[:0])
	if err != nil {
		s.writeError.Add(1)
		return
	}
	s.line = line
	if s.file != nil && s.size > 0 && s.size+int64(len(line)) > s.maxBytes {
		s.rotate()
	}
	if s.file == nil {
		if err := s.open(); err != nil {
			s.writeError.Add(1)
			return
		}
	}
	n, err := s.w.Write(line)
	s.size += int64(n)
	if err != nil {
		s.fail()
		return
	}
	s.written.Add(1)
}

// flush flushes the buffer to the file.
func (s *FileSink) flush() {
	if s.file != nil && s.w.Buffered() > 0 {
		if err := s.w.Flush(); err != nil {
			s.fail()
		}
	}
}

// fail counts a write error and drops the file, to be reopened by the next
// write: a bufio.Writer keeps its first error forever.
func (s *FileSink) fail() {
	s.writeError.Add(1)
	_ = s.file.Close()
	s.file = nil
}

// rotate flushes and closes the file, renames it to path.1 (replacing the
// previous one) and leaves the next write to open a new file.
func (s *FileSink) rotate() {
	s.flush()
	if s.file == nil {
		return
	}
	if err := s.file.Close(); err != nil {
		s.writeError.Add(1)
	}
	s.file = nil
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		s.writeError.Add(1)
	}
}

// open opens the file for appending and reads its current size.
func (s *FileSink) open() error {
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, fileMode) //nolint:gosec // The path is the operator's --decision-log-file.
	if err != nil {
		return fmt.Errorf("evidence: opening the decision log file: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("evidence: opening the decision log file: %w", err)
	}
	s.file, s.size = f, info.Size()
	if s.w == nil {
		s.w = bufio.NewWriterSize(f, writeBufferSize)
	} else {
		s.w.Reset(f)
	}
	return nil
}
