package evidence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func openSink(t *testing.T, opts FileSinkOptions) *FileSink {
	t.Helper()
	s, err := OpenFileSink(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenFileSinkOptions(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range []FileSinkOptions{
		{},
		{Path: filepath.Join(dir, "a"), MaxBytes: -1},
		{Path: filepath.Join(dir, "a"), QueueSize: -1},
		{Path: filepath.Join(dir, "a"), QueueSize: MaxQueueSize + 1},
	} {
		if _, err := OpenFileSink(opts); !errors.Is(err, ErrInvalidSink) {
			t.Errorf("OpenFileSink(%+v) err = %v", opts, err)
		}
	}
	if _, err := OpenFileSink(FileSinkOptions{Path: filepath.Join(dir, "missing", "x.jsonl")}); err == nil {
		t.Error("opening a file in a missing directory succeeded")
	}
}

// TestSinkWritesJSONL checks every record becomes one line of its JSON,
// appended after what the file held, and that the file is private.
func TestSinkWritesJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(path, []byte("previous\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openSink(t, FileSinkOptions{Path: path})
	records := []Record{capacityRecord(t), roundRobinRecord(), notAdmittedRecord(), refusedRecord()}
	for i := range records {
		s.Enqueue(records[i])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := []byte("previous\n")
	for _, r := range records {
		want, _ = r.AppendJSON(want)
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("file\n%s\nwant\n%s", got, want)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != fileMode {
		t.Fatalf("mode %v, %v", info.Mode(), err)
	}
	if s.Written() != 4 || s.Drops() != (SinkDrops{}) {
		t.Fatalf("written %d, drops %+v", s.Written(), s.Drops())
	}
}

// TestSinkRotates checks the file is renamed to .1 before a line would take
// it past MaxBytes, replacing the previous .1, so at most two files exist.
func TestSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	r := refusedRecord()
	line, _ := r.AppendJSON(nil)
	s := openSink(t, FileSinkOptions{Path: path, MaxBytes: int64(2*len(line) + 1)})
	for range 7 { // files of 2 lines: 2, 2, 2, 1.
		s.Enqueue(r)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, line) {
		t.Fatalf("current file %q, want one line", got)
	}
	if got := readFile(t, path+".1"); !bytes.Equal(got, append(append([]byte{}, line...), line...)) {
		t.Fatalf("previous file %q, want two lines", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d files, want 2", len(entries))
	}
}

// TestSinkDropsWhenFull blocks the writer and checks that Enqueue neither
// blocks nor grows the queue: records beyond it are dropped and counted.
func TestSinkDropsWhenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	// Only the first write blocks: it waits until the test receives on
	// entered (a blocking send, whatever the goroutines' timing), then
	// until release.
	entered, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	s, err := OpenFileSink(FileSinkOptions{Path: path, QueueSize: 2, BeforeWrite: func() {
		first.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := refusedRecord()
	s.Enqueue(r)
	<-entered // the writer holds the first record; the queue is empty.
	for range 5 {
		s.Enqueue(r) // 2 fit, 3 are dropped.
	}
	if d := s.Drops(); d.QueueFull != 3 {
		t.Fatalf("drops %+v, want 3 queue_full", d)
	}
	close(release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Written() != 3 || bytes.Count(readFile(t, path), []byte("\n")) != 3 {
		t.Fatalf("written %d", s.Written())
	}
	s.Enqueue(r)
	if d := s.Drops(); d.Closed != 1 {
		t.Fatalf("drops after close %+v", d)
	}
}

// TestSinkCloseStopsWriter proves the writer goroutine is gone once Close
// returns, and that Close is idempotent.
func TestSinkCloseStopsWriter(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := OpenFileSink(FileSinkOptions{Path: filepath.Join(t.TempDir(), "d.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	r := capacityRecord(t)
	s.Enqueue(r)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("Close returned before the writer stopped")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestSinkWriteErrorsAreCounted puts directories where the writer's files
// go once the first record is written: the rotation's rename and the
// reopen then fail, and the lost record is counted as a write error
// without blocking or panicking.
func TestSinkWriteErrorsAreCounted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	r := refusedRecord()
	line, _ := r.AppendJSON(nil)
	entered, release := make(chan struct{}), make(chan struct{})
	s := openSink(t, FileSinkOptions{Path: path, MaxBytes: int64(len(line)), BeforeWrite: func() {
		<-entered
		<-release
	}})
	s.Enqueue(r) // fills the file; the next record rotates.
	s.Enqueue(r)
	entered <- struct{}{} // the first write may proceed ...
	release <- struct{}{}
	entered <- struct{}{} // ... and the second waits until the trap is set.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{path, path + ".1", filepath.Join(path+".1", "occupied")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := s.Drops(); d.WriteError == 0 || s.Written() != 1 {
		t.Fatalf("drops %+v, written %d; want write errors and one record written", d, s.Written())
	}
}
