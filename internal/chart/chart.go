// Package chart draws the SVG charts of qualification reports, the demo and
// the benchmark harness: grouped bar panels (with optional per-category
// marks, such as a ceiling) and line panels, side by side in one image. It
// owns the layout only; callers choose what to plot. It must never read
// measurements or decide what they mean. It imports only the standard
// library, so no plotting library is part of the product.
package chart

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strconv"
)

// Headroom is the space left above the tallest value for the legend, as a
// fraction of that value.
const Headroom = 1.3

// Series is one series of a grouped bar panel: a value per category.
type Series struct {
	// Name is the legend entry.
	Name string
	// Values holds one value per category, in the categories' order.
	Values []float64
}

// Point is one point of a line.
type Point struct{ X, Y float64 }

// Line is one line of a line panel.
type Line struct {
	// Name is the legend entry.
	Name string
	// Points are drawn in order.
	Points []Point
}

// Panel is one chart. A panel with Categories is a grouped bar panel; one
// without is a line panel.
type Panel struct {
	Title  string
	XLabel string // line panels only
	YLabel string

	// Categories name the bar groups, left to right.
	Categories []string
	// Bars are the series of a bar panel: one bar per series in each group.
	Bars []Series
	// Marks, when its Values are set, draws one dashed level across each
	// category's group (for example each member's ceiling).
	Marks Series

	// Lines are the lines of a line panel.
	Lines []Line
}

// Geometry of a panel, in pixels.
const (
	marginLeft   = 64
	marginRight  = 14
	marginTop    = 38
	marginBottom = 64
	fontSize     = 12
	yTicks       = 5
)

// palette colours the series in order (the Tableau 10 colours).
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// WriteFile draws the panels side by side in one width × height SVG at path.
func WriteFile(path string, width, height int, panels ...Panel) error {
	f, err := os.Create(path) //nolint:gosec // the caller's own output file.
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := Render(w, width, height, panels...); err != nil {
		_ = f.Close()
		return fmt.Errorf("chart %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Render writes the panels side by side as one width × height SVG document.
// It writes nothing when a panel is invalid: a series whose length is not
// the number of categories, or a value that is negative or not finite.
func Render(out io.Writer, width, height int, panels ...Panel) error {
	if len(panels) == 0 || width <= 0 || height <= marginTop+marginBottom {
		return errors.New("chart: no panel, or no room to draw one")
	}
	for _, p := range panels {
		if err := p.validate(); err != nil {
			return fmt.Errorf("chart: panel %q: %w", p.Title, err)
		}
	}
	c := &canvas{w: bufio.NewWriter(out)}
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%d">`+"\n",
		width, height, width, height, fontSize)
	c.printf(`<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	pw := float64(width) / float64(len(panels))
	for i, p := range panels {
		x0 := float64(i) * pw
		c.panel(p, area{
			left: x0 + marginLeft, right: x0 + pw - marginRight,
			top: marginTop, bottom: float64(height - marginBottom),
		})
	}
	c.printf("</svg>\n")
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}

func (p Panel) validate() error {
	check := func(name string, vs ...float64) error {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("series %s has the value %v; values must be finite and not negative", name, v)
			}
		}
		return nil
	}
	if len(p.Categories) == 0 {
		if len(p.Bars) > 0 || p.Marks.Values != nil {
			return errors.New("bars without categories")
		}
		for _, l := range p.Lines {
			for _, pt := range l.Points {
				if math.IsNaN(pt.X) || math.IsInf(pt.X, 0) {
					return fmt.Errorf("line %s has the x value %v", l.Name, pt.X)
				}
				if err := check(l.Name, pt.Y); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if len(p.Lines) > 0 {
		return errors.New("lines and bars in one panel")
	}
	for _, s := range p.series() {
		if len(s.Values) != len(p.Categories) {
			return fmt.Errorf("series %s has %d values for %d categories", s.Name, len(s.Values), len(p.Categories))
		}
		if err := check(s.Name, s.Values...); err != nil {
			return err
		}
	}
	return nil
}

// series returns the bar series and, when set, the marks.
func (p Panel) series() []Series {
	all := append([]Series(nil), p.Bars...)
	if p.Marks.Values != nil {
		all = append(all, p.Marks)
	}
	return all
}

// area is a panel's plotting area in pixels; y grows downwards.
type area struct{ left, right, top, bottom float64 }

// canvas writes SVG elements and keeps the first write error.
type canvas struct {
	w   *bufio.Writer
	err error
}

func (c *canvas) printf(format string, args ...any) {
	if c.err == nil {
		_, c.err = fmt.Fprintf(c.w, format, args...)
	}
}

// text writes escaped text at (x, y) with extra attributes.
func (c *canvas) text(x, y float64, attrs, s string) {
	c.printf(`<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", x, y, attrs, html.EscapeString(s))
}

// legendEntry is one legend line: a colour and a name, dashed for marks.
type legendEntry struct {
	name, color string
	dashed      bool
}

func (c *canvas) panel(p Panel, a area) {
	c.text((a.left+a.right)/2, marginTop/2, ` text-anchor="middle" font-weight="bold"`, p.Title)
	c.text(a.left-48, (a.top+a.bottom)/2, fmt.Sprintf(` text-anchor="middle" transform="rotate(-90 %.1f %.1f)"`, a.left-48, (a.top+a.bottom)/2), p.YLabel)
	top := 0.0
	for _, s := range p.series() {
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	for _, l := range p.Lines {
		for _, pt := range l.Points {
			top = max(top, pt.Y)
		}
	}
	ymax := top * Headroom
	if ymax == 0 {
		ymax = 1 // an empty or all-zero panel still has an axis.
	}
	y := func(v float64) float64 { return a.bottom - v/ymax*(a.bottom-a.top) }
	step := niceStep(ymax / yTicks)
	for v := 0.0; v <= ymax+step/1e9; v += step {
		c.printf(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", a.left, a.right, y(v), y(v))
		c.text(a.left-6, y(v)+4, ` text-anchor="end"`, tick(v, step))
	}
	c.printf(`<path d="M%.1f %.1fV%.1fH%.1f" fill="none" stroke="black"/>`+"\n", a.left, a.top, a.bottom, a.right)
	var legend []legendEntry
	if len(p.Categories) > 0 {
		legend = c.bars(p, a, y)
	} else {
		legend = c.lines(p, a, y)
	}
	// The legend sits in the top right corner, as wide as its longest name.
	longest := 0
	for _, e := range legend {
		longest = max(longest, len([]rune(e.name)))
	}
	lx := a.right - 8 - float64(longest)*fontSize*0.6 - 20
	for i, e := range legend {
		ly := a.top + 8 + float64(i)*(fontSize+4)
		if e.dashed {
			c.printf(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="4 2"/>`+"\n", lx-2, lx+12, ly, ly, e.color)
		} else {
			c.printf(`<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>`+"\n", lx, ly-5, e.color)
		}
		c.text(lx+18, ly+4, "", e.name)
	}
}

// bars draws a grouped bar panel and returns its legend.
func (c *canvas) bars(p Panel, a area, y func(float64) float64) []legendEntry {
	gw := (a.right - a.left) / float64(len(p.Categories))
	bw := gw * 0.8 / float64(max(len(p.Bars), 1))
	rotate := false
	for _, name := range p.Categories {
		rotate = rotate || float64(len(name))*fontSize*0.6 > gw
	}
	for ci, name := range p.Categories {
		gx := a.left + float64(ci)*gw
		for si, s := range p.Bars {
			x := gx + gw*0.1 + float64(si)*bw
			c.printf(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				x, y(s.Values[ci]), bw, a.bottom-y(s.Values[ci]), palette[si%len(palette)])
		}
		if p.Marks.Values != nil {
			my := y(p.Marks.Values[ci])
			c.printf(`<line class="mark" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black" stroke-width="1.5" stroke-dasharray="4 2"/>`+"\n",
				gx+gw*0.05, gx+gw*0.95, my, my)
		}
		lx, ly := gx+gw/2, a.bottom+16
		if rotate {
			c.text(lx, ly, fmt.Sprintf(` text-anchor="end" transform="rotate(-25 %.1f %.1f)"`, lx, ly), name)
		} else {
			c.text(lx, ly, ` text-anchor="middle"`, name)
		}
	}
	var legend []legendEntry
	for si, s := range p.Bars {
		legend = append(legend, legendEntry{name: s.Name, color: palette[si%len(palette)]})
	}
	if p.Marks.Values != nil {
		legend = append(legend, legendEntry{name: p.Marks.Name, color: "black", dashed: true})
	}
	return legend
}

// lines draws a line panel and returns its legend.
func (c *canvas) lines(p Panel, a area, y func(float64) float64) []legendEntry {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range p.Lines {
		for _, pt := range l.Points {
			lo, hi = min(lo, pt.X), max(hi, pt.X)
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	if hi == lo {
		hi = lo + 1
	}
	x := func(v float64) float64 { return a.left + (v-lo)/(hi-lo)*(a.right-a.left) }
	step := niceStep((hi - lo) / yTicks)
	for v := math.Ceil(lo/step) * step; v <= hi+step/1e9; v += step {
		c.text(x(v), a.bottom+16, ` text-anchor="middle"`, tick(v, step))
	}
	c.text((a.left+a.right)/2, a.bottom+40, ` text-anchor="middle"`, p.XLabel)
	var legend []legendEntry
	for i, l := range p.Lines {
		color := palette[i%len(palette)]
		c.printf(`<polyline class="line" fill="none" stroke="%s" stroke-width="1.5" points="`, color)
		for j, pt := range l.Points {
			if j > 0 {
				c.printf(" ")
			}
			c.printf("%.1f,%.1f", x(pt.X), y(pt.Y))
		}
		c.printf(`"/>` + "\n")
		legend = append(legend, legendEntry{name: l.Name, color: color})
	}
	return legend
}

// niceStep rounds a positive raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		return mag
	case f <= 2:
		return 2 * mag
	case f <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// tick formats an axis value with as many decimals as the step needs.
func tick(v, step float64) string {
	return strconv.FormatFloat(v, 'f', max(0, int(-math.Floor(math.Log10(step)))), 64)
}
