package evidence

import (
	"sync"
	"sync/atomic"
)

// Bounds of the in-memory decision log.
const (
	// DefaultLogSize is the ring buffer's default capacity
	// (docs/EVIDENCE.md#2-storage).
	DefaultLogSize = 4096
	// MaxLogSize bounds the ring buffer: a record takes about 200 bytes
	// plus its scheduler payload, so a million is a few hundred MiB, more
	// than any router needs to keep.
	MaxLogSize = 1_000_000
)

// Sink receives every record the Log keeps, after its scheduler payload was
// checked. Enqueue is called on the request's goroutine: it must not block.
// The record's Scheduler payload is shared and must not be changed.
// FileSink implements it.
type Sink interface {
	// Enqueue takes one record.
	Enqueue(r Record)
}

// LogOptions configures a Log.
type LogOptions struct {
	// Size is the ring buffer's capacity, 0..MaxLogSize. Zero keeps no
	// record in memory; records still reach the Sink.
	Size int
	// Sink, when set, receives every record. Nil means none.
	Sink Sink
}

// Log keeps the latest decision records in a ring buffer and hands every
// record to its Sink. Add is the request path: one short critical section
// and no allocation. All methods are safe for concurrent use.
type Log struct {
	sink    Sink
	dropped atomic.Uint64 // scheduler payloads dropped as invalid.

	mu    sync.Mutex
	ring  []Record
	total int // records ever added; the next record's sequence number (int64: never wraps).
}

// NewLog returns an empty Log. It returns an error wrapping ErrInvalidSize
// when opts.Size is outside 0..MaxLogSize.
func NewLog(opts LogOptions) (*Log, error) {
	if opts.Size < 0 || opts.Size > MaxLogSize {
		return nil, ErrInvalidSize
	}
	return &Log{sink: opts.Sink, ring: make([]Record, opts.Size)}, nil
}

// Add stores one record, evicting the oldest when the ring is full, and
// passes it to the Sink. An invalid scheduler payload (see
// Record.SchedulerValid) is dropped first, so every surface sees the record
// without it. The record's Scheduler becomes the Log's: the caller must not
// change it afterwards.
func (l *Log) Add(r Record) {
	if r.sanitize() {
		l.dropped.Add(1)
	}
	if len(l.ring) > 0 {
		l.mu.Lock()
		l.ring[l.total%len(l.ring)] = r
		l.total++
		l.mu.Unlock()
	}
	if l.sink != nil {
		l.sink.Enqueue(r)
	}
}

// DroppedSchedulerPayloads returns how many scheduler payloads Add dropped
// as invalid.
func (l *Log) DroppedSchedulerPayloads() uint64 { return l.dropped.Load() }

// Len returns the number of records held.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldLocked()
}

// heldLocked returns the number of records held. l.mu must be held.
func (l *Log) heldLocked() int {
	return min(l.total, len(l.ring))
}

// Latest returns up to limit records, newest first. The records are
// copies; their Scheduler payloads are shared and must not be changed.
func (l *Log) Latest(limit int) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(max(limit, 0), l.heldLocked())
	out := make([]Record, 0, n)
	for i := range n {
		out = append(out, l.ring[(l.total-1-i)%len(l.ring)])
	}
	return out
}

// Find returns the newest record with the request id.
func (l *Log) Find(requestID string) (Record, bool) {
	var found Record
	ok := false
	l.walk(func(r *Record) bool {
		if r.RequestID == requestID {
			found, ok = *r, true
			return false
		}
		return true
	})
	return found, ok
}

// Summary summarizes the records held, as SummarizeJSONL does a file.
func (l *Log) Summary() Summary {
	var s summarizer
	l.walk(func(r *Record) bool {
		s.add(r)
		return true
	})
	return s.summary()
}

// walkChunk is how many records walk visits per hold of the lock, so that
// a walk over a large ring never stalls Add for long.
const walkChunk = 1024

// walk calls f on the records held when it starts, newest first, until f
// returns false. It holds the lock for at most walkChunk records at a time;
// records evicted between two chunks are skipped, never visited twice.
func (l *Log) walk(f func(*Record) bool) {
	l.mu.Lock()
	seq, remaining := l.total, l.heldLocked() // seq: one past the next record to visit.
	l.mu.Unlock()
	for remaining > 0 {
		l.mu.Lock()
		oldest := l.total - l.heldLocked() // sequence of the oldest record still held.
		for range min(remaining, walkChunk) {
			if seq-1 < oldest {
				l.mu.Unlock()
				return // the rest was evicted meanwhile.
			}
			seq--
			remaining--
			if !f(&l.ring[seq%len(l.ring)]) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
	}
}
