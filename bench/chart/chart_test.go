package chart

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

func TestBars(t *testing.T) {
	p, err := Bars("t", "ms", []string{"a", "b"}, []Series{{"x", []float64{1, 4}}, {"y", []float64{2, 3}}}, vg.Millimeter)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 || p.Y.Max != 4*Headroom {
		t.Fatalf("y axis %v..%v, want 0..%v", p.Y.Min, p.Y.Max, 4*Headroom)
	}
	if p, err := Bars("t", "ms", []string{"a"}, []Series{{"x", []float64{0}}}, vg.Millimeter); err != nil || p.Y.Max != 1 {
		t.Fatalf("all-zero panel: %v, y max %v", err, p.Y.Max)
	}
	if _, err := Bars("t", "ms", []string{"a", "b"}, []Series{{"short", []float64{1}}}, vg.Millimeter); err == nil ||
		!strings.Contains(err.Error(), "series short has 1 values for 2 categories") {
		t.Fatalf("mismatched series: %v", err)
	}
}

func TestSavePNG(t *testing.T) {
	p1, err := Bars("one", "ms", []string{"a"}, []Series{{"x", []float64{1}}}, vg.Millimeter)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Bars("two", "%", []string{"a"}, []Series{{"x", []float64{2}}}, vg.Millimeter)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.png")
	if err := SavePNG(path, 8*vg.Inch, 3*vg.Inch, p1, p2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path) //nolint:gosec // the test's own file.
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w != int((8 * vg.Inch).Dots(vgDPI)) {
		t.Fatalf("width %d px", w)
	}
	if err := SavePNG(filepath.Join(t.TempDir(), "missing", "c.png"), vg.Inch, vg.Inch, p1); err == nil {
		t.Fatal("a file in a missing directory was written")
	}
}

// vgDPI is vgimg's default resolution.
const vgDPI = 96
