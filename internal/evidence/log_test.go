package evidence

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func newTestLog(t *testing.T, size int, sink Sink) *Log {
	t.Helper()
	l, err := NewLog(LogOptions{Size: size, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewLogBounds(t *testing.T) {
	for _, size := range []int{-1, MaxLogSize + 1} {
		if _, err := NewLog(LogOptions{Size: size}); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("NewLog(%d) err = %v", size, err)
		}
	}
	for _, size := range []int{0, 1, DefaultLogSize} {
		if _, err := NewLog(LogOptions{Size: size}); err != nil {
			t.Errorf("NewLog(%d) err = %v", size, err)
		}
	}
}

// numbered returns a refused record with request id n.
func numbered(n int) Record {
	r := refusedRecord()
	r.RequestID = fmt.Sprintf("req-%d", n)
	return r
}

func TestRingEvictsOldest(t *testing.T) {
	l := newTestLog(t, 3, nil)
	if got := l.Latest(10); len(got) != 0 || l.Len() != 0 {
		t.Fatalf("empty log: %v", got)
	}
	for i := range 5 {
		l.Add(numbered(i))
	}
	var ids []string
	for _, r := range l.Latest(10) {
		ids = append(ids, r.RequestID)
	}
	if fmt.Sprint(ids) != "[req-4 req-3 req-2]" || l.Len() != 3 {
		t.Fatalf("Latest = %v, Len = %d", ids, l.Len())
	}
	if got := l.Latest(1); len(got) != 1 || got[0].RequestID != "req-4" {
		t.Fatalf("Latest(1) = %v", got)
	}
	if _, ok := l.Find("req-1"); ok {
		t.Fatal("found an evicted record")
	}
	if r, ok := l.Find("req-2"); !ok || r.RequestID != "req-2" {
		t.Fatalf("Find(req-2) = %v, %v", r, ok)
	}
	if s := l.Summary(); s.Records != 3 || s.RefusalReasons[CodeModelNotFound] != 3 {
		t.Fatalf("Summary = %+v", s)
	}
}

func TestFindReturnsNewest(t *testing.T) {
	l := newTestLog(t, 8, nil)
	a, b := refusedRecord(), notAdmittedRecord()
	a.RequestID, b.RequestID = "same", "same"
	l.Add(a)
	l.Add(b)
	if r, ok := l.Find("same"); !ok || r.Outcome != OutcomeNotAdmitted {
		t.Fatalf("Find = %+v", r)
	}
}

// TestZeroSizeKeepsNothingButFeedsTheSink checks --decision-log-size 0.
func TestZeroSizeKeepsNothingButFeedsTheSink(t *testing.T) {
	var sink captureSink
	l := newTestLog(t, 0, &sink)
	l.Add(capacityRecord(t))
	if l.Len() != 0 || len(l.Latest(5)) != 0 || len(sink.records) != 1 {
		t.Fatalf("Len %d, sink %d", l.Len(), len(sink.records))
	}
}

// captureSink keeps what it is given.
type captureSink struct {
	mu      sync.Mutex
	records []Record
}

func (s *captureSink) Enqueue(r Record) {
	s.mu.Lock()
	s.records = append(s.records, r)
	s.mu.Unlock()
}

// TestWalkUnderConcurrentAdds races summaries and lookups against adds on
// a ring larger than one walk chunk: every walk visits distinct records,
// none twice, and never more than the ring holds.
func TestWalkUnderConcurrentAdds(t *testing.T) {
	const size = 3*walkChunk + 7
	l := newTestLog(t, size, nil)
	for i := range size {
		l.Add(numbered(i))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := size; ; i++ {
			select {
			case <-stop:
				return
			default:
				l.Add(numbered(i))
			}
		}
	}()
	for range 20 {
		seen := map[string]bool{}
		l.walk(func(r *Record) bool {
			if seen[r.RequestID] {
				t.Errorf("visited %s twice", r.RequestID)
			}
			seen[r.RequestID] = true
			return true
		})
		if len(seen) > size {
			t.Errorf("visited %d records of a %d ring", len(seen), size)
		}
		if s := l.Summary(); s.Records > size {
			t.Errorf("summary of %d records", s.Records)
		}
	}
	close(stop)
	wg.Wait()
}

// TestInvalidPayloadDroppedOnEverySurface adds records with invalid
// payloads and checks that memory, the line, the summary and the file all
// show the record without scheduler evidence, and that a valid payload
// shows on all four.
func TestInvalidPayloadDroppedOnEverySurface(t *testing.T) {
	for name, mutate := range invalidPayloads() {
		t.Run(name, func(t *testing.T) {
			r := capacityRecord(t)
			mutate(&r)
			checkSurfaces(t, r, false)
		})
	}
	t.Run("valid", func(t *testing.T) { checkSurfaces(t, capacityRecord(t), true) })
}

// checkSurfaces adds r to a Log with a file sink and checks the four
// surfaces agree on whether r carries scheduler evidence.
func checkSurfaces(t *testing.T, r Record, wantEvidence bool) {
	t.Helper()
	path := t.TempDir() + "/decisions.jsonl"
	sink, err := OpenFileSink(FileSinkOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLog(t, 4, sink)
	l.Add(r)
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	stored, ok := l.Find(r.RequestID)
	if !ok {
		t.Fatal("record not stored")
	}
	// Memory.
	if (stored.Scheduler != nil) != wantEvidence {
		t.Errorf("memory: scheduler %v, want evidence %v", stored.Scheduler, wantEvidence)
	}
	// Line.
	if strings.Contains(stored.String(), "replica_scheduler=capacity") != wantEvidence {
		t.Errorf("line: %s", stored.String())
	}
	// Summary.
	if s := l.Summary(); (len(s.WinnerFreshness) == 1) != wantEvidence || s.Records != 1 {
		t.Errorf("summary: %+v", s)
	}
	// File.
	data := readFile(t, path)
	if strings.Contains(string(data), "replica_scheduler") != wantEvidence {
		t.Errorf("file: %s", data)
	}
	back, err := ParseRecord(trimNewline(data))
	if err != nil || !sameRecord(back, stored) {
		t.Errorf("file record %+v (%v), want %+v", back, err, stored)
	}
	if wantEvidence != (l.DroppedSchedulerPayloads() == 0) {
		t.Errorf("dropped payloads = %d", l.DroppedSchedulerPayloads())
	}
}
