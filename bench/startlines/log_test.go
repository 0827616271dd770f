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
