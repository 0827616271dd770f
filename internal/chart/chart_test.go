package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// element is one parsed SVG element.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parse decodes an SVG document completely, failing the test if it is not
// well-formed XML, and returns its elements in document order.
func parse(t *testing.T, doc []byte) []element {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var out []element
	var open []int // indexes in out of the elements not yet closed
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			open = append(open, len(out))
			out = append(out, e)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				out[open[len(open)-1]].text += string(tok)
			}
		}
	}
}

func render(t *testing.T, panels ...Panel) []element {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, 900, 300, panels...); err != nil {
		t.Fatal(err)
	}
	return parse(t, b.Bytes())
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBarsAreProportionalAndLabelled(t *testing.T) {
	els := render(t, Panel{
		Title: "Latency <p50 & p99>", YLabel: "ms", Categories: []string{"a", "b"},
		Bars:  []Series{{"x", []float64{1, 4}}, {"y", []float64{2, 0}}},
		Marks: Series{Name: "ceiling", Values: []float64{3, 3}},
	})
	var heights []float64
	var marks int
	texts := map[string]bool{}
	for _, e := range els {
		switch {
		case e.name == "rect" && e.attrs["class"] == "bar":
			heights = append(heights, num(t, e.attrs["height"]))
		case e.name == "line" && e.attrs["class"] == "mark":
			marks++
		case e.name == "text":
			texts[e.text] = true
		}
	}
	// Bars are drawn category by category: a/x, a/y, b/x, b/y.
	if len(heights) != 4 {
		t.Fatalf("%d bars, want 4", len(heights))
	}
	if r := heights[2] / heights[0]; math.Abs(r-4) > 0.05 {
		t.Errorf("bar of 4 is %.2f× the bar of 1", r)
	}
	if heights[3] != 0 {
		t.Errorf("bar of 0 is %v px tall", heights[3])
	}
	if marks != 2 {
		t.Errorf("%d marks, want one per category", marks)
	}
	for _, want := range []string{"Latency <p50 & p99>", "ms", "a", "b", "x", "y", "ceiling", "0"} {
		if !texts[want] {
			t.Errorf("no text %q in %v", want, texts)
		}
	}
}

func TestAxisHasHeadroomAndNiceTicks(t *testing.T) {
	els := render(t, Panel{Categories: []string{"a"}, Bars: []Series{{"x", []float64{10}}}})
	var ticks []string
	for _, e := range els {
		if e.name == "text" && e.attrs["text-anchor"] == "end" {
			ticks = append(ticks, e.text)
		}
	}
	// 10 × Headroom = 13; a fifth of it rounds up to a step of 5.
	if got := strings.Join(ticks, " "); got != "0 5 10" {
		t.Fatalf("ticks %q, want \"0 5 10\"", got)
	}
	for raw, want := range map[float64]float64{0.26: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 4200: 5000} {
		if got := niceStep(raw); math.Abs(got-want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
	if got := tick(0.30000000000000004, 0.1); got != "0.3" {
		t.Errorf("tick = %q", got)
	}
}

func TestAllZeroPanelStillHasAnAxis(t *testing.T) {
	els := render(t, Panel{Categories: []string{"a"}, Bars: []Series{{"x", []float64{0}}}}, Panel{})
	n := 0
	for _, e := range els {
		if e.name == "text" && e.attrs["text-anchor"] == "end" {
			n++
		}
	}
	if n < 2*2 {
		t.Fatalf("%d y ticks over two empty panels", n)
	}
}

func TestLinesSpanThePanel(t *testing.T) {
	els := render(t, Panel{XLabel: "seconds", Lines: []Line{
		{"one", []Point{{0, 1}, {5, 2}, {10, 1}}},
		{"two", []Point{{0, 0}, {10, 3}}},
	}})
	var lines [][]string
	for _, e := range els {
		if e.name == "polyline" {
			lines = append(lines, strings.Fields(e.attrs["points"]))
		}
	}
	if len(lines) != 2 || len(lines[0]) != 3 || len(lines[1]) != 2 {
		t.Fatalf("polylines %v", lines)
	}
	first := strings.Split(lines[0][0], ",")
	last := strings.Split(lines[0][2], ",")
	if x0, x1 := num(t, first[0]), num(t, last[0]); x0 != marginLeft || x1 != 900-marginRight {
		t.Fatalf("line spans x %v..%v, want %v..%v", x0, x1, marginLeft, 900-marginRight)
	}
}

func TestSidePanelsShareTheWidth(t *testing.T) {
	els := render(t, Panel{Title: "left"}, Panel{Title: "right"}, Panel{Title: "third"})
	for _, e := range els {
		if e.name == "text" && e.text == "right" {
			if x := num(t, e.attrs["x"]); x != 300+(marginLeft+300-marginRight)/2 {
				t.Fatalf("second title at x %v", x)
			}
			return
		}
	}
	t.Fatal("no second title")
}

func TestInvalidPanelsWriteNothing(t *testing.T) {
	for _, tc := range []struct {
		p    Panel
		want string
	}{
		{Panel{Categories: []string{"a", "b"}, Bars: []Series{{"short", []float64{1}}}}, "series short has 1 values for 2 categories"},
		{Panel{Categories: []string{"a"}, Bars: []Series{{"x", []float64{1}}}, Marks: Series{Name: "m", Values: []float64{1, 2}}}, "series m has 2 values"},
		{Panel{Categories: []string{"a"}, Bars: []Series{{"nan", []float64{math.NaN()}}}}, "series nan has the value NaN"},
		{Panel{Categories: []string{"a"}, Bars: []Series{{"neg", []float64{-1}}}}, "not negative"},
		{Panel{Lines: []Line{{"inf", []Point{{math.Inf(1), 1}}}}}, "line inf has the x value +Inf"},
		{Panel{Bars: []Series{{"x", []float64{1}}}}, "bars without categories"},
		{Panel{Categories: []string{"a"}, Lines: []Line{{"l", nil}}}, "lines and bars"},
	} {
		var b bytes.Buffer
		err := Render(&b, 900, 300, Panel{Title: "ok"}, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
		if b.Len() != 0 {
			t.Errorf("%q: wrote %d bytes", tc.want, b.Len())
		}
	}
	if err := Render(io.Discard, 900, 300); err == nil {
		t.Error("no panel was accepted")
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.svg")
	if err := WriteFile(path, 600, 200, Panel{Title: "one"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path) //nolint:gosec // the test's own file.
	if err != nil {
		t.Fatal(err)
	}
	if els := parse(t, b); els[0].name != "svg" || els[0].attrs["width"] != "600" {
		t.Fatalf("root %+v", els[0])
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "c.svg"), 600, 200, Panel{}); err == nil {
		t.Fatal("a file in a missing directory was written")
	}
}
