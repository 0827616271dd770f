package qualify

import "github.com/sluice-dev/sluice/internal/chart"

// Chart size in pixels.
const chartWidth, chartHeight = 1100, 420

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
	return chart.WriteFile(path, chartWidth, chartHeight,
		chart.Panel{Title: r.Tier + ": latency (" + r.Evidence + ")", YLabel: "ms",
			Categories: []string{"TTFT p50", "TTFT p99", "E2E p50", "E2E p99"}, Bars: lat},
		chart.Panel{Title: "Share of requests by member", YLabel: "%", Categories: members, Bars: share})
}
