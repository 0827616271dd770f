//go:build linux

package main

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sluice-dev/sluice/bench/chart"
)

// Chart geometry.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
	barWidth    = 14 * vg.Millimeter
)

// headroom is the space left above the tallest line for the legend, as a
// fraction of the largest value; bar panels use chart.Headroom.
const headroom = chart.Headroom

// groupedBars saves a bar chart with one group of bars per category and
// one bar per series in each group.
func groupedBars(path, title, ylabel string, categories []string, series []chart.Series) error {
	p, err := groupedBarPlot(title, ylabel, categories, series)
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return p.Save(chartWidth, chartHeight, path)
}

// groupedBarPlot builds the plot of groupedBars: bars narrow as series
// are added beyond three, so a group keeps its width.
func groupedBarPlot(title, ylabel string, categories []string, series []chart.Series) (*plot.Plot, error) {
	w := barWidth
	if len(series) > 3 {
		w = barWidth * 3 / vg.Length(len(series))
	}
	return chart.Bars(title, ylabel, categories, series, w)
}

// lineSeries is one line of a line chart.
type lineSeries struct {
	name string
	xy   plotter.XYs
}

// lines saves a line chart.
func lines(path, title, xlabel, ylabel string, series []lineSeries) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	top := 0.0
	for i, s := range series {
		for _, v := range s.xy {
			top = max(top, v.Y)
		}
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top = true
	p.Y.Max = top * headroom
	p.Add(plotter.NewGrid())
	return p.Save(chartWidth, chartHeight, path)
}

// writeCharts writes the PNG charts of the scenarios that ran.
func writeCharts(dir string, r *results) error {
	if o := r.Overhead; o != nil {
		var names []string
		var p50, p99, rps []float64
		for _, row := range o.Summary.Rows {
			names = append(names, row.Name)
			p50 = append(p50, row.P50US)
			p99 = append(p99, row.P99US)
			rps = append(rps, row.RPS32)
		}
		left, err := groupedBarPlot("p50 at concurrency 1", "µs", names, []chart.Series{{Name: "p50", Values: p50}})
		if err != nil {
			return err
		}
		right, err := groupedBarPlot("p99 at concurrency 1", "µs", names, []chart.Series{{Name: "p99", Values: p99}})
		if err != nil {
			return err
		}
		left.Legend = plot.NewLegend()
		right.Legend = plot.NewLegend()
		left.X.Tick.Label.Rotation, right.X.Tick.Label.Rotation = 0.3, 0.3
		left.X.Tick.Label.XAlign, right.X.Tick.Label.XAlign = draw.XRight, draw.XRight
		if err := chart.SavePNG(filepath.Join(dir, "overhead-latency.png"), chartWidth, chartHeight, left, right); err != nil {
			return err
		}
		if err := groupedBars(filepath.Join(dir, "overhead-throughput.png"),
			"Throughput at 32 connections (wrk, median of rounds)", "requests/s", names,
			[]chart.Series{{Name: "req/s", Values: rps}}); err != nil {
			return err
		}
	}
	if h := r.Hidden; h != nil {
		cats := []string{"TTFT p50", "TTFT p99", "e2e p50", "e2e p99"}
		var series []chart.Series
		for _, row := range h.Summary.Rows {
			series = append(series, chart.Series{Name: row.Name, Values: []float64{row.TTFTP50, row.TTFTP99, row.E2EP50, row.E2EP99}})
		}
		if err := groupedBars(filepath.Join(dir, "hidden-load.png"),
			"One engine under hidden load: streaming latency (median of rounds)", "ms", cats, series); err != nil {
			return err
		}
	}
	if s := r.Streams; s != nil {
		var rss, active []lineSeries
		for _, p := range s.Phases {
			var a, b plotter.XYs
			for _, t := range p.Timeline {
				a = append(a, plotter.XY{X: t.T, Y: t.RSSMiB})
				b = append(b, plotter.XY{X: t.T, Y: float64(t.Active)})
			}
			rss = append(rss, lineSeries{p.Name, a})
			active = append(active, lineSeries{p.Name, b})
		}
		if err := lines(filepath.Join(dir, "streams-rss.png"),
			fmt.Sprintf("Router RSS during %d concurrent SSE streams", s.Streams), "seconds", "MiB", rss); err != nil {
			return err
		}
		if err := lines(filepath.Join(dir, "streams-leases.png"),
			fmt.Sprintf("Router active leases during %d concurrent SSE streams", s.Streams), "seconds", "leases", active); err != nil {
			return err
		}
	}
	return nil
}
