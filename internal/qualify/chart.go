package qualify

import (
	"gonum.org/v1/plot/vg"

	"github.com/sluice-dev/sluice/bench/chart"
)

// Chart geometry.
const (
	chartWidth  = 28 * vg.Centimeter
	chartHeight = 11 * vg.Centimeter
	barWidth    = 4 * vg.Millimeter
)

// writeChart draws two panels: the latency quantiles of each phase (direct
// against routed is the router's cost), and each member's share of each
// phase's requests.
func writeChart(path string, r *Report) error {
	members := make([]string, 0, len(r.Members))
	for _, m := range r.Members {
		members = append(members, m.ID)
	}
	var lat, share []chart.Series
	for _, ph := range r.Phases {
		lat = append(lat, chart.Series{Name: ph.Name, Values: []float64{ph.TTFT.P50, ph.TTFT.P99, ph.E2E.P50, ph.E2E.P99}})
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
		share = append(share, chart.Series{Name: ph.Name, Values: s})
	}
	p1, err := chart.Bars(r.Tier+": latency ("+r.Evidence+")", "ms", []string{"TTFT p50", "TTFT p99", "E2E p50", "E2E p99"}, lat, barWidth)
	if err != nil {
		return err
	}
	p2, err := chart.Bars("Share of requests by member", "%", members, share, barWidth)
	if err != nil {
		return err
	}
	return chart.SavePNG(path, chartWidth, chartHeight, p1, p2)
}
