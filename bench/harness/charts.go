//go:build linux

package main

import (
	"fmt"
	"path/filepath"

	"github.com/sluice-dev/sluice/internal/chart"
)

// Chart size in pixels.
const chartWidth, chartHeight = 800, 450

// writeCharts writes the SVG charts of the scenarios that ran.
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
		if err := chart.WriteFile(filepath.Join(dir, "overhead-latency.svg"), 2*chartWidth, chartHeight,
			chart.Panel{Title: "p50 at concurrency 1", YLabel: "µs", Categories: names, Bars: []chart.Series{{Name: "p50", Values: p50}}},
			chart.Panel{Title: "p99 at concurrency 1", YLabel: "µs", Categories: names, Bars: []chart.Series{{Name: "p99", Values: p99}}}); err != nil {
			return err
		}
		if err := chart.WriteFile(filepath.Join(dir, "overhead-throughput.svg"), chartWidth, chartHeight,
			chart.Panel{Title: "Throughput at 32 connections (wrk, median of rounds)", YLabel: "requests/s",
				Categories: names, Bars: []chart.Series{{Name: "req/s", Values: rps}}}); err != nil {
			return err
		}
	}
	if h := r.Hidden; h != nil {
		var series []chart.Series
		for _, row := range h.Summary.Rows {
			series = append(series, chart.Series{Name: row.Name, Values: []float64{row.TTFTP50, row.TTFTP99, row.E2EP50, row.E2EP99}})
		}
		if err := chart.WriteFile(filepath.Join(dir, "hidden-load.svg"), chartWidth, chartHeight,
			chart.Panel{Title: "One engine under hidden load: streaming latency (median of rounds)", YLabel: "ms",
				Categories: []string{"TTFT p50", "TTFT p99", "e2e p50", "e2e p99"}, Bars: series}); err != nil {
			return err
		}
	}
	if s := r.Streams; s != nil {
		var rss, active []chart.Line
		for _, p := range s.Phases {
			a, b := chart.Line{Name: p.Name}, chart.Line{Name: p.Name}
			for _, t := range p.Timeline {
				a.Points = append(a.Points, chart.Point{X: t.T, Y: t.RSSMiB})
				b.Points = append(b.Points, chart.Point{X: t.T, Y: float64(t.Active)})
			}
			rss, active = append(rss, a), append(active, b)
		}
		if err := chart.WriteFile(filepath.Join(dir, "streams-rss.svg"), chartWidth, chartHeight,
			chart.Panel{Title: fmt.Sprintf("Router RSS during %d concurrent SSE streams", s.Streams),
				XLabel: "seconds", YLabel: "MiB", Lines: rss}); err != nil {
			return err
		}
		if err := chart.WriteFile(filepath.Join(dir, "streams-leases.svg"), chartWidth, chartHeight,
			chart.Panel{Title: fmt.Sprintf("Router active leases during %d concurrent SSE streams", s.Streams),
				XLabel: "seconds", YLabel: "leases", Lines: active}); err != nil {
			return err
		}
	}
	return nil
}
