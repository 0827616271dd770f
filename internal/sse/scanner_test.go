package sse

import (
	"bytes"
	"strings"
	"testing"
)

// reference is the framing rules applied to the whole input at once: split
// into lines at CRLF, LF or CR (a final line without a terminator counts),
// then each line checked on its own.
func reference(in []byte) Verdict {
	var lines [][]byte
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in)
			break
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	sawDone := false
	for _, l := range lines {
		if len(l) == 0 || l[0] == ':' {
			continue
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || sawDone {
			return Malformed
		}
		switch string(name) {
		case "event", "id", "retry":
		case "data":
			v := bytes.TrimLeft(value, " ")
			switch {
			case string(v) == "[DONE]":
				sawDone = true
			case len(v) == 0 || v[0] != '{':
				return Malformed
			}
		default:
			return Malformed
		}
	}
	if !sawDone {
		return Truncated
	}
	return Complete
}

// scanChunks feeds in to a Scanner in chunks of the given sizes (cycled;
// a zero size is an empty write) and returns the verdict.
func scanChunks(in []byte, sizes []int) Verdict {
	var s Scanner
	for k := 0; len(in) > 0; k++ {
		n := len(in)
		if len(sizes) > 0 {
			n = min(sizes[k%len(sizes)], len(in))
		}
		s.Write(in[:n])
		in = in[n:]
	}
	return s.End()
}

// chunkings are the chunkings every case is checked with.
func chunkings(in []byte, extra []int) [][]int {
	cs := [][]int{nil, {1}, {2}, {3}, {0, 1}, {7, 1, 2}}
	if len(extra) > 0 {
		cs = append(cs, extra)
	}
	if len(in) <= 256 {
		for i := 1; i < len(in); i++ {
			cs = append(cs, []int{i, len(in)})
		}
	}
	return cs
}

// check compares the scanner with the reference for every chunking.
func check(t *testing.T, in []byte, extra []int) Verdict {
	t.Helper()
	want := reference(in)
	for _, c := range chunkings(in, extra) {
		if got := scanChunks(in, c); got != want {
			t.Fatalf("%q in chunks %v: scanner says %v, reference %v", in, c, got, want)
		}
	}
	return want
}

func TestScanner(t *testing.T) {
	const ev = `data: {"choices":[{"delta":{"content":"hi"}}]}`
	for _, tt := range []struct {
		desc string
		in   string
		want Verdict
	}{
		{"openai stream LF", ev + "\n\n" + ev + "\n\ndata: [DONE]\n\n", Complete},
		{"openai stream CRLF", ev + "\r\n\r\n" + ev + "\r\n\r\ndata: [DONE]\r\n\r\n", Complete},
		{"openai stream CR", ev + "\r\r" + ev + "\r\rdata: [DONE]\r\r", Complete},
		{"final line without terminator", ev + "\n\ndata: [DONE]", Complete},
		{"no space after the colon", "data:{}\n\ndata:[DONE]\n\n", Complete},
		{"several spaces", "data:   {}\n\ndata:    [DONE]\n\n", Complete},
		{"comments, event, id, retry", ": keep-alive\nevent: delta\nid: 7\nretry: 100\n" + ev + "\n\ndata: [DONE]\n\n: bye\n\n", Complete},
		{"responses api events", "event: response.output_text.delta\ndata: {\"delta\":\"x\"}\n\n" +
			"event: response.completed\ndata: {}\n\ndata: [DONE]\n\n", Complete},
		{"empty stream", "", Truncated},
		{"cut after an event", ev + "\n\n" + ev + "\n\n", Truncated},
		{"cut mid-line", ev + "\n\ndata: {\"choi", Truncated},
		{"only comments", ": ping\n\n: ping\n", Truncated},
		{"payload not json", ev + "\n\ndata: hello\n\ndata: [DONE]\n\n", Malformed},
		{"payload a json array", "data: [1,2]\n\ndata: [DONE]\n\n", Malformed},
		{"empty payload", "data:\n\ndata: [DONE]\n\n", Malformed},
		{"spaces only payload", "data:   \r\n\r\ndata: [DONE]\n\n", Malformed},
		{"done with trailing space", "data: [DONE] \n\n", Malformed},
		{"done lower case", "data: [done]\n\n", Malformed},
		{"done cut", "data: [DO", Malformed},
		{"unknown field", "foo: bar\n\ndata: [DONE]\n\n", Malformed},
		{"field name too long", "dataa: {}\n\ndata: [DONE]\n\n", Malformed},
		{"field name a prefix", "dat: {}\n\ndata: [DONE]\n\n", Malformed},
		{"line without colon", "data\n\ndata: [DONE]\n\n", Malformed},
		{"plain text body", "Internal error\n", Malformed},
		{"leading space before the field", " data: {}\n\ndata: [DONE]\n\n", Malformed},
		{"event after done", "data: [DONE]\n\n" + ev + "\n\n", Malformed},
		{"id after done", "data: [DONE]\nid: 3\n\n", Malformed},
		{"two dones", "data: [DONE]\n\ndata: [DONE]\n\n", Malformed},
		{"malformed then truncated", "data: x\n\n" + ev, Malformed},
		{"cr lf split across a line", "data: {}\r", Truncated},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			if got := check(t, []byte(tt.in), nil); got != tt.want {
				t.Errorf("verdict %v, want %v", got, tt.want)
			}
		})
	}
}

// TestScannerLongLine: a megabyte-long data line is scanned without
// keeping it, in any chunking.
func TestScannerLongLine(t *testing.T) {
	in := []byte(`data: {"x":"` + strings.Repeat("a", 1<<20) + "\"}\r\n\r\ndata: [DONE]\r\n\r\n")
	for _, size := range []int{1, 4096, 32 << 10, len(in)} {
		if got := scanChunks(in, []int{size}); got != Complete {
			t.Errorf("chunks of %d: verdict %v, want complete", size, got)
		}
	}
}

// TestScannerReuse: End resets the scanner for a new stream.
func TestScannerReuse(t *testing.T) {
	var s Scanner
	s.Write([]byte("bad line\n"))
	if v := s.End(); v != Malformed {
		t.Fatalf("first stream %v, want malformed", v)
	}
	s.Write([]byte("data: [DONE]\n\n"))
	if v := s.End(); v != Complete {
		t.Fatalf("second stream %v, want complete", v)
	}
}

// TestScannerAllocations: scanning does not allocate.
func TestScannerAllocations(t *testing.T) {
	in := []byte(": c\nevent: e\ndata: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n")
	var s Scanner
	if n := testing.AllocsPerRun(100, func() {
		for i := range in {
			s.Write(in[i : i+1])
		}
		if s.End() != Complete {
			t.Fatal("not complete")
		}
	}); n != 0 {
		t.Errorf("%v allocations per stream, want 0", n)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Complete: "complete", Truncated: "truncated", Malformed: "malformed", 9: "unknown"} {
		if got := v.String(); got != want {
			t.Errorf("%d: %q, want %q", v, got, want)
		}
	}
}

// FuzzScanner checks the scanner against the reference for every
// chunking of each input: whole, byte by byte, every split in two (inputs
// up to 256 bytes) and the fuzzer's own chunk sizes.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"data: {}\r\n\r\ndata: [DONE]\r\n\r\n",
		"data: {}\r\rdata: [DONE]\r\r",
		": c\nevent: x\nid: 1\nretry: 5\ndata: {}\n\n",
		"data: [DONE]\n\ndata: {}\n\n",
		"data: nope\n\n",
		"data:\n",
		"dat\r\n",
		"data: [DON",
	} {
		f.Add([]byte(seed), []byte{1, 3})
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		extra := make([]int, 0, len(sizes))
		progress := false
		for _, b := range sizes {
			extra = append(extra, int(b))
			progress = progress || b > 0
		}
		if !progress { // only empty writes would never end.
			extra = nil
		}
		check(t, in, extra)
	})
}

// BenchmarkScanner measures scanning a 64-event chat completion stream in
// the chunks an engine flushes (one event each).
func BenchmarkScanner(b *testing.B) {
	ev := []byte("data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token\"}}]}\n\n")
	done := []byte("data: [DONE]\n\n")
	b.SetBytes(int64(64*len(ev) + len(done)))
	b.ReportAllocs()
	var s Scanner
	for b.Loop() {
		for range 64 {
			s.Write(ev)
		}
		s.Write(done)
		if s.End() != Complete {
			b.Fatal("not complete")
		}
	}
}
