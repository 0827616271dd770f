package evidence

import (
	"testing"
)

// BenchmarkAdd measures what the request path pays per request for its
// decision record: building the record (a struct copy) and appending it to
// the ring, including the scheduler payload check for a Capacity record
// with three score rows. The scheduler decision itself is allocated by the
// lease, not here.
func BenchmarkAdd(b *testing.B) {
	for _, bc := range []struct {
		name string
		rec  Record
	}{
		{"capacity", capacityRecord(b)},
		{"round-robin", roundRobinRecord()},
		{"refused", refusedRecord()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, _ := NewLog(LogOptions{Size: DefaultLogSize})
			b.ReportAllocs()
			for b.Loop() {
				l.Add(bc.rec)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			l, _ := NewLog(LogOptions{Size: DefaultLogSize})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Add(bc.rec)
				}
			})
		})
	}
}

// BenchmarkAddWithSink adds the file sink's Enqueue (a non-blocking channel
// send) to BenchmarkAdd; the writer's JSON encoding runs on its own
// goroutine and is not part of the request path.
func BenchmarkAddWithSink(b *testing.B) {
	s, err := OpenFileSink(FileSinkOptions{Path: b.TempDir() + "/d.jsonl"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	l, _ := NewLog(LogOptions{Size: DefaultLogSize, Sink: s})
	r := capacityRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		l.Add(r)
	}
}

// BenchmarkAppendLine measures the one-line format.
func BenchmarkAppendLine(b *testing.B) {
	r := capacityRecord(b)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendLine(buf[:0])
	}
}
