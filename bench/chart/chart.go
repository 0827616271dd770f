// Package chart draws the PNG charts of the demo, the benchmark harness and
// qualification reports: grouped bar panels, and panels side by side in one
// image. It owns the layout only; callers choose what to plot. It must
// never read measurements or decide what they mean.
package chart

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Headroom is the space left above the tallest bar for the legend, as a
// fraction of the largest value.
const Headroom = 1.3

// Series is one series of a grouped bar chart: a value per category.
type Series struct {
	// Name is the legend entry.
	Name string
	// Values holds one value per category, in the categories' order.
	Values []float64
}

// Bars builds a grouped bar panel: one group per category, one bar of
// width barWidth per series in each group, the y axis from zero to the
// tallest bar plus Headroom.
func Bars(title, yLabel string, categories []string, series []Series, barWidth vg.Length) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	top := 0.0
	n := float64(len(series))
	for i, s := range series {
		if len(s.Values) != len(categories) {
			return nil, fmt.Errorf("chart: series %s has %d values for %d categories", s.Name, len(s.Values), len(categories))
		}
		b, err := plotter.NewBarChart(plotter.Values(s.Values), barWidth)
		if err != nil {
			return nil, err
		}
		for _, v := range s.Values {
			top = max(top, v)
		}
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(i)
		b.Offset = vg.Length(float64(i)-(n-1)/2) * barWidth
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.Legend.Top = true
	p.NominalX(categories...)
	p.Y.Max = top * Headroom
	if p.Y.Max == 0 {
		p.Y.Max = 1 // an empty or all-zero panel still has an axis.
	}
	return p, nil
}

// SavePNG draws plots side by side in one width × height PNG at path.
func SavePNG(path string, width, height vg.Length, plots ...*plot.Plot) error {
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path) //nolint:gosec // the caller's own output file.
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
