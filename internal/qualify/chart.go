package qualify

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart geometry.
const (
	chartWidth  = 28 * vg.Centimeter
	chartHeight = 11 * vg.Centimeter
	barWidth    = vg.Length(12) // points
	// headroom leaves space above the tallest bar for the legend.
	headroom = 1.25
)

// writeChart draws two panels: the latency quantiles of each phase (direct
// against routed is the router's cost), and each member's share of each
// phase's requests.
func writeChart(path string, r *Report) error {
	members := make([]string, 0, len(r.Members))
	for _, m := range r.Members {
		members = append(members, m.ID)
	}
	var lat, share [][]float64
	var names []string
	for _, ph := range r.Phases {
		names = append(names, ph.Name)
		lat = append(lat, []float64{ph.TTFT.P50, ph.TTFT.P99, ph.E2E.P50, ph.E2E.P99})
		total := 0
		for _, n := range ph.Members {
			total += n
		}
		s := make([]float64, len(members))
		for i, id := range members {
			if total > 0 {
				s[i] = 100 * float64(ph.Members[id]) / float64(total)
			}
		}
		share = append(share, s)
	}
	p1, err := bars(r.Tier+": latency ("+r.Evidence+")", "ms", []string{"TTFT p50", "TTFT p99", "E2E p50", "E2E p99"}, names, lat)
	if err != nil {
		return err
	}
	p2, err := bars("Share of requests by member", "%", members, names, share)
	if err != nil {
		return err
	}
	img := vgimg.New(chartWidth, chartHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{p1, p2}}
	canvases := plot.Align(plots, tiles, dc)
	for j, p := range plots[0] {
		p.Draw(canvases[0][j])
	}
	f, err := os.Create(path) //nolint:gosec // the caller's own output directory.
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// bars builds a grouped bar chart: one group per x name, one bar per
// series (values[i] is series i, labelled labels[i]).
func bars(title, yLabel string, x, labels []string, values [][]float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	for i, v := range values {
		b, err := plotter.NewBarChart(plotter.Values(v), barWidth)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(i)
		b.Offset = vg.Length(float64(i)-float64(len(values)-1)/2) * barWidth
		p.Add(b)
		p.Legend.Add(labels[i], b)
	}
	p.Legend.Top = true
	p.NominalX(x...)
	p.Y.Max = max(p.Y.Max*headroom, 1)
	return p, nil
}
