package startlines

import (
	"strings"
	"testing"
)

// TestLogMatchesCompleteLines: a line split across writes is matched once
// complete, Found closes once, and every byte is kept.
func TestLogMatchesCompleteLines(t *testing.T) {
	var seen []string
	l := NewLog(func(line []byte) bool {
		seen = append(seen, string(line))
		return strings.HasPrefix(string(line), "ready")
	})
	for _, w := range []string{"boot", "ing\nrea", "dy at :1\nafter\n"} {
		if _, err := l.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-l.Found():
	default:
		t.Fatal("Found not closed after the ready line")
	}
	if strings.Join(seen, "|") != "booting|ready at :1" {
		t.Fatalf("matcher saw %q", seen)
	}
	if l.String() != "booting\nready at :1\nafter\n" {
		t.Fatalf("kept %q", l.String())
	}
}

// TestLogWithoutMatcherOnlyKeeps: with no matcher, Found stays open.
func TestLogWithoutMatcherOnlyKeeps(t *testing.T) {
	l := NewLog(nil)
	_, _ = l.Write([]byte("x\n"))
	select {
	case <-l.Found():
		t.Fatal("Found closed without a matcher")
	default:
	}
	if l.String() != "x\n" {
		t.Fatalf("kept %q", l.String())
	}
}

// TestWatcherWritesThroughAndBoundsPartialLines: every byte reaches the
// underlying writer, a line split across writes is found, and a partial
// line longer than maxWatchedLine is dropped rather than kept growing.
func TestWatcherWritesThroughAndBoundsPartialLines(t *testing.T) {
	var out strings.Builder
	var got string
	w := NewWatcher(&out, func(l []byte) bool {
		if strings.HasPrefix(string(l), "addr=") {
			got = string(l)
			return true
		}
		return false
	})
	long := strings.Repeat("x", maxWatchedLine+1)
	for _, chunk := range []string{long, "first line\nad", "dr=127.0.0.1:9", "\nlater\n"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
		if len(w.partial) > maxWatchedLine {
			t.Fatalf("kept a partial line of %d bytes", len(w.partial))
		}
	}
	select {
	case <-w.Found():
	default:
		t.Fatal("address line not found")
	}
	if got != "addr=127.0.0.1:9" {
		t.Fatalf("matched %q", got)
	}
	if out.String() != long+"first line\naddr=127.0.0.1:9\nlater\n" {
		t.Fatalf("wrote through %d bytes, want every byte", out.Len())
	}
}
