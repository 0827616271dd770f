package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/chart"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// phaseReport is what one strategy's phase measured.
type phaseReport struct {
	Strategy string `json:"strategy"`
	Tier     string `json:"tier"`
	Alias    string `json:"alias"`
	// Sent, Succeeded and Refused (503) are client-side counts;
	// OtherFailures are requests that failed other than by a 503.
	Sent          int             `json:"sent"`
	Succeeded     int             `json:"succeeded"`
	Refused       int             `json:"refused_503"`
	OtherFailures int             `json:"other_failures"`
	Dropped       int             `json:"dropped_by_generator"`
	Statuses      map[string]int  `json:"statuses"`
	Errors        map[string]int  `json:"errors"`
	Elapsed       float64         `json:"elapsed_seconds"`
	Throughput    float64         `json:"throughput_rps"`
	Tokens        int             `json:"tokens"`
	TTFT          loadgen.Summary `json:"ttft"`
	ITL           loadgen.Summary `json:"itl"`
	E2E           loadgen.Summary `json:"e2e"`
	Members       []memberReport  `json:"members"`
	// Overshoot is the number of members whose engine saw more concurrent
	// requests than the member's ceiling.
	Overshoot int `json:"overshoot"`
}

// memberReport is one member in one phase, from the router's responses
// and the engine's own statistics.
type memberReport struct {
	ID         string `json:"id"`
	HiddenLoad int    `json:"hidden_load"`
	Slots      int    `json:"slots"`
	Ceiling    int    `json:"ceiling"`
	// Requests counts the responses whose X-Sluice-Member named the
	// member; EngineRequests is what the engine counted.
	Requests       int     `json:"requests"`
	EngineRequests uint64  `json:"engine_requests"`
	Share          float64 `json:"share"`
	// MaxInFlight is the engine's highest number of requests inside its
	// handler at once; MaxRunning its highest number holding a slot.
	MaxInFlight int  `json:"engine_max_in_flight"`
	MaxRunning  int  `json:"engine_max_running"`
	Overshoot   bool `json:"overshoot"`
	// E2E is the end-to-end latency of the member's successful requests.
	E2E loadgen.Summary `json:"e2e"`
}

// newPhaseReport assembles a phase's report from the generator's result and
// the engines' statistics.
func newPhaseReport(o *options, t *sluicev1.ReplicaTier, res *loadgen.Result, stats map[string]enginesim.Stats) phaseReport {
	pr := phaseReport{
		Strategy:   string(t.Spec.Strategy),
		Tier:       tierKey(t),
		Alias:      t.Spec.Aliases[0],
		Sent:       res.Sent,
		Succeeded:  res.Succeeded,
		Refused:    res.Statuses[503],
		Dropped:    res.Dropped,
		Statuses:   map[string]int{},
		Errors:     map[string]int{},
		Elapsed:    seconds(res.Elapsed),
		Throughput: res.Throughput(),
		Tokens:     res.Tokens,
		TTFT:       res.TTFT.Summary(),
		ITL:        res.ITL.Summary(),
		E2E:        res.E2E.Summary(),
	}
	pr.OtherFailures = res.Failed() - pr.Refused
	for code, n := range res.Statuses {
		pr.Statuses[statusKey(code)] = n
	}
	for kind, n := range res.Errors {
		pr.Errors[string(kind)] = n
	}
	total := 0
	for _, n := range res.HeaderCounts {
		total += n
	}
	ceil := ceilings(t)
	for _, id := range slices.Sorted(maps.Keys(ceil)) {
		s := stats[id]
		m := memberReport{
			ID:             id,
			HiddenLoad:     hiddenOf(o, id),
			Slots:          o.maxNumSeqs,
			Ceiling:        ceil[id],
			Requests:       res.HeaderCounts[id],
			EngineRequests: s.TotalRequests,
			MaxInFlight:    s.MaxInFlight,
			MaxRunning:     s.MaxRunning,
			Overshoot:      s.MaxInFlight > ceil[id],
		}
		if d := res.HeaderE2E[id]; d != nil {
			m.E2E = d.Summary()
		}
		if total > 0 {
			m.Share = float64(m.Requests) / float64(total)
		}
		if m.Overshoot {
			pr.Overshoot++
		}
		pr.Members = append(pr.Members, m)
	}
	return pr
}

// printPhase prints one phase's table.
func printPhase(w io.Writer, pr *phaseReport) {
	fmt.Fprintf(w, "%s  (tier %s, model %q)\n", pr.Strategy, pr.Tier, pr.Alias)
	fmt.Fprintf(w, "  %d requests in %.1fs (%.1f/s): %d succeeded, %d refused (503), %d other failures\n",
		pr.Sent, pr.Elapsed, pr.Throughput, pr.Succeeded, pr.Refused, pr.OtherFailures)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  member\thidden load\trequests\tshare\tengine max in flight\tceiling\tovershoot\te2e p50\te2e p99\t")
	for _, m := range pr.Members {
		over := "0"
		if m.Overshoot {
			over = fmt.Sprintf("%d  OVERSHOOT", m.MaxInFlight-m.Ceiling)
		}
		fmt.Fprintf(tw, "  %s\t%d/%d\t%d\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t\n",
			m.ID, m.HiddenLoad, m.Slots, m.Requests, 100*m.Share, m.MaxInFlight, m.Ceiling, over, ms(m.E2E.P50), ms(m.E2E.P99))
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  latency\tp50\tp99\tmax\t")
	for _, row := range []struct {
		name string
		s    loadgen.Summary
	}{{"time to first token", pr.TTFT}, {"end-to-end", pr.E2E}} {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", row.name, ms(row.s.P50), ms(row.s.P99), ms(row.s.Max))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

// ms renders a duration in whole milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

// report is the JSON report of one demo run.
type report struct {
	GeneratedAt time.Time      `json:"generated_at"`
	Workload    workloadReport `json:"workload"`
	Phases      []phaseReport  `json:"phases"`
	Comparison  comparison     `json:"comparison"`
	// Failures lists every failed check; empty means the demo passed.
	Failures []string `json:"failures"`
}

// workloadReport records the workload and the simulated engines.
type workloadReport struct {
	Mode         string  `json:"mode"`
	API          string  `json:"api"`
	Stream       bool    `json:"stream"`
	Rate         float64 `json:"rate_per_second"`
	Duration     float64 `json:"duration_seconds"`
	MaxTokens    int     `json:"max_tokens"`
	Seed         uint64  `json:"seed"`
	Warmup       int     `json:"warmup_requests"`
	MaxNumSeqs   int     `json:"engine_max_num_seqs"`
	HiddenMember string  `json:"hidden_member"`
	HiddenLoad   int     `json:"hidden_load"`
	TTFTBase     float64 `json:"engine_ttft_base_ms"`
	TTFTPerSeq   float64 `json:"engine_ttft_per_seq_ms"`
	ITLBase      float64 `json:"engine_itl_base_ms"`
	ITLPerSeq    float64 `json:"engine_itl_per_seq_ms"`
}

// comparison compares the Capacity phase with the RoundRobin phase.
type comparison struct {
	RoundRobinP99E2E  float64 `json:"roundrobin_p99_e2e_ms"`
	CapacityP99E2E    float64 `json:"capacity_p99_e2e_ms"`
	P99E2ERatio       float64 `json:"capacity_over_roundrobin_p99_e2e"`
	RoundRobinP99TTFT float64 `json:"roundrobin_p99_ttft_ms"`
	CapacityP99TTFT   float64 `json:"capacity_p99_ttft_ms"`
	P99TTFTRatio      float64 `json:"capacity_over_roundrobin_p99_ttft"`
	CapacityLowerP99  bool    `json:"capacity_lower_p99_e2e"`
}

// newReport assembles the report and runs the checks.
func newReport(o *options, phases []phaseReport) report {
	rep := report{
		GeneratedAt: time.Now().UTC().Round(time.Second),
		Workload: workloadReport{
			Mode: string(loadgen.OpenLoop), API: string(loadgen.ChatCompletions), Stream: true,
			Rate: o.rate, Duration: o.duration.Seconds(), MaxTokens: o.maxTokens, Seed: o.seed, Warmup: o.warmup,
			MaxNumSeqs: o.maxNumSeqs, HiddenMember: o.hiddenMember, HiddenLoad: o.hiddenLoad,
			TTFTBase: loadgen.Milliseconds(o.ttftBase), TTFTPerSeq: loadgen.Milliseconds(o.ttftPerSeq),
			ITLBase: loadgen.Milliseconds(o.itlBase), ITLPerSeq: loadgen.Milliseconds(o.itlPerSeq),
		},
		Phases:   phases,
		Failures: []string{},
	}
	for _, p := range phases {
		if p.Overshoot > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %d member(s) over their ceiling", p.Strategy, p.Overshoot))
		}
		if p.OtherFailures > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %d request(s) failed other than by a 503 (%v, statuses %v)",
				p.Strategy, p.OtherFailures, p.Errors, p.Statuses))
		}
		if p.Dropped > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: the generator dropped %d arrivals", p.Strategy, p.Dropped))
		}
		if p.Succeeded == 0 {
			rep.Failures = append(rep.Failures, p.Strategy+": no request succeeded")
		}
		for _, m := range p.Members {
			if uint64(m.Requests) != m.EngineRequests { //nolint:gosec // a count is non-negative.
				rep.Failures = append(rep.Failures, fmt.Sprintf("%s: the router admitted %d requests to %s, its engine counted %d",
					p.Strategy, m.Requests, m.ID, m.EngineRequests))
			}
		}
	}
	if len(phases) == 2 {
		rr, c := phases[0], phases[1]
		rep.Comparison = comparison{
			RoundRobinP99E2E: loadgen.Milliseconds(rr.E2E.P99), CapacityP99E2E: loadgen.Milliseconds(c.E2E.P99),
			RoundRobinP99TTFT: loadgen.Milliseconds(rr.TTFT.P99), CapacityP99TTFT: loadgen.Milliseconds(c.TTFT.P99),
			CapacityLowerP99: c.E2E.P99 < rr.E2E.P99,
		}
		if rr.E2E.P99 > 0 {
			rep.Comparison.P99E2ERatio = ratio(c.E2E.P99, rr.E2E.P99)
		}
		if rr.TTFT.P99 > 0 {
			rep.Comparison.P99TTFTRatio = ratio(c.TTFT.P99, rr.TTFT.P99)
		}
	}
	return rep
}

// ratio returns a/b rounded to three decimals.
func ratio(a, b time.Duration) float64 {
	return float64(int64(float64(a)/float64(b)*1000+0.5)) / 1000
}

// printVerdict prints the comparison and the checks.
func printVerdict(w io.Writer, rep *report) {
	c := rep.Comparison
	verb := "lower"
	if !c.CapacityLowerP99 {
		verb = "NOT lower"
	}
	fmt.Fprintf(w, "Capacity p99 end-to-end %.0f ms vs RoundRobin %.0f ms (%.2f×): %s.\n",
		c.CapacityP99E2E, c.RoundRobinP99E2E, c.P99E2ERatio, verb)
	fmt.Fprintf(w, "Capacity p99 time to first token %.0f ms vs RoundRobin %.0f ms (%.2f×).\n",
		c.CapacityP99TTFT, c.RoundRobinP99TTFT, c.P99TTFTRatio)
	over := 0
	for _, p := range rep.Phases {
		over += p.Overshoot
	}
	fmt.Fprintf(w, "Ceiling overshoot seen by the engines: %d.\n", over)
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "FAILED checks:\n  %s\n", strings.Join(rep.Failures, "\n  "))
	}
}

// writeReport writes the report as indented JSON.
func writeReport(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600) //nolint:gosec // the path is the demo's own --out directory.
}

// Chart size in pixels.
const chartWidth, chartHeight = 1440, 480

// writeChart draws three panels side by side: p50/p99 latencies per
// strategy, each member's share of the requests, and each engine's highest
// concurrency against its ceiling.
func writeChart(path string, rep *report) error {
	var lat, share, peak []chart.Series
	var members []string
	var ceil []float64
	for _, p := range rep.Phases {
		lat = append(lat, chart.Series{Name: p.Strategy, Values: []float64{
			loadgen.Milliseconds(p.TTFT.P50), loadgen.Milliseconds(p.TTFT.P99),
			loadgen.Milliseconds(p.E2E.P50), loadgen.Milliseconds(p.E2E.P99),
		}})
		var sh, pk []float64
		members, ceil = members[:0], ceil[:0]
		for _, m := range p.Members {
			name := m.ID
			if m.HiddenLoad > 0 {
				name += fmt.Sprintf(" (%d/%d hidden)", m.HiddenLoad, m.Slots)
			}
			members = append(members, name)
			ceil = append(ceil, float64(m.Ceiling))
			sh = append(sh, 100*m.Share)
			pk = append(pk, float64(m.MaxInFlight))
		}
		share = append(share, chart.Series{Name: p.Strategy, Values: sh})
		peak = append(peak, chart.Series{Name: p.Strategy, Values: pk})
	}
	return chart.WriteFile(path, chartWidth, chartHeight,
		chart.Panel{Title: "Latency", YLabel: "ms", Categories: []string{"TTFT p50", "TTFT p99", "E2E p50", "E2E p99"}, Bars: lat},
		chart.Panel{Title: "Share of requests", YLabel: "%", Categories: members, Bars: share},
		chart.Panel{Title: "Engine max in flight vs ceiling", YLabel: "requests", Categories: members, Bars: peak,
			Marks: chart.Series{Name: "ceiling", Values: ceil}})
}
