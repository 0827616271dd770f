package qualify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Verdicts.
const (
	// VerdictPass means every check passed.
	VerdictPass = "pass"
	// VerdictFail means at least one check failed.
	VerdictFail = "fail"
)

// The artifact files in the output directory.
const (
	// ReportFile is the JSON report.
	ReportFile = "report.json"
	// SummaryFile is the text summary, as printed.
	SummaryFile = "summary.txt"
	// ChartFile is the SVG chart.
	ChartFile = "chart.svg"
)

// Report is one qualification's result.
type Report struct {
	// Tier is namespace/name; Generation the generation qualified.
	Tier       string `json:"tier"`
	Generation int64  `json:"generation"`
	// Node, Alias, ServedModel and Strategy are the tier's.
	Node        string `json:"node"`
	Alias       string `json:"alias"`
	ServedModel string `json:"served_model"`
	Strategy    string `json:"strategy"`
	// Evidence is synthetic (an engine is a simulator) or real.
	Evidence string `json:"evidence"`
	// Verdict is pass or fail.
	Verdict string `json:"verdict"`
	// Provenance is what the tier declares about its engines.
	Provenance map[string]string `json:"provenance"`
	// Members are the members with their ceilings and direct load.
	Members []Member `json:"members"`
	// Identities are what the members say they serve.
	Identities []MemberIdentity `json:"identities"`
	// Phases are the direct, routed and sustained phases.
	Phases []Phase `json:"phases"`
	// Transitions are the intent changes made, in order.
	Transitions []Transition `json:"transitions"`
	// Checks are every check with its outcome.
	Checks []Check `json:"checks"`
	// DecisionSummary is the router's GET /admin/v1/decisions/summary at
	// the end: every request its decision log holds, not only these.
	DecisionSummary json.RawMessage `json:"router_decision_summary,omitempty"`
	// StartedAt and FinishedAt bound the run.
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// Check is one pass/fail criterion of the verdict.
type Check struct {
	// Name is identity, provenance, direct, routed, drain, sustained,
	// restore, load or complete.
	Name string `json:"name"`
	// Pass is the outcome.
	Pass bool `json:"pass"`
	// Detail says what was seen.
	Detail string `json:"detail"`
}

func pass(name, format string, args ...any) Check {
	return Check{Name: name, Pass: true, Detail: fmt.Sprintf(format, args...)}
}

func fail(name, format string, args ...any) Check {
	return Check{Name: name, Detail: fmt.Sprintf(format, args...)}
}

// Transition is one intent change the run made.
type Transition struct {
	// AtSeconds is the time since the sustained phase started.
	AtSeconds float64 `json:"at_seconds"`
	// Action is quiesce, drain, readmit or restore.
	Action string `json:"action"`
	// Member is the member changed.
	Member string `json:"member"`
	// Result is what the transition reported.
	Result string `json:"result"`
}

// Phase is one load phase's numbers.
type Phase struct {
	// Name is direct, routed or sustained; Target is members or router.
	Name   string `json:"name"`
	Target string `json:"target"`
	// Concurrency and DurationSeconds are the load offered.
	Concurrency     int     `json:"concurrency"`
	DurationSeconds float64 `json:"duration_seconds"`
	// Sent, Succeeded and Failed count requests; Errors and Statuses
	// break the failures down.
	Sent      int            `json:"sent"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Errors    map[string]int `json:"errors,omitempty"`
	Statuses  map[string]int `json:"statuses,omitempty"`
	// Throughput is succeeded requests per second.
	Throughput float64 `json:"throughput_rps"`
	// TTFT, ITL and E2E are latency quantiles of the succeeded requests.
	TTFT Latency `json:"ttft"`
	ITL  Latency `json:"itl"`
	E2E  Latency `json:"e2e"`
	// Members counts responses by the member that served them (routed
	// phases: the router's X-Sluice-Member; direct: the member sent to).
	Members map[string]int `json:"members"`
	// Error is why the phase could not run, when it could not.
	Error string `json:"error,omitempty"`
}

// Latency is a distribution's quantiles in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// latency returns the quantiles of the union of the samples (nearest
// rank).
func latency(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	q := func(f float64) float64 {
		i := int(f*float64(len(samples))+0.999999) - 1
		return loadgen.Milliseconds(samples[min(max(i, 0), len(samples)-1)])
	}
	return Latency{Count: len(samples), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: loadgen.Milliseconds(samples[len(samples)-1])}
}

// newPhase merges the results of one phase, keyed by member for a direct
// phase (one result per member) or "" for a routed one.
func newPhase(name, target string, concurrency int, d time.Duration, results map[string]*loadgen.Result) Phase {
	ph := Phase{Name: name, Target: target, Concurrency: concurrency, DurationSeconds: d.Seconds(),
		Errors: map[string]int{}, Statuses: map[string]int{}, Members: map[string]int{}}
	var ttft, itl, e2e []time.Duration
	var elapsed time.Duration
	for _, id := range slices.Sorted(maps.Keys(results)) {
		r := results[id]
		ph.Sent += r.Sent
		ph.Succeeded += r.Succeeded
		ph.Failed += r.Failed()
		for k, v := range r.Errors {
			ph.Errors[string(k)] += v
		}
		for k, v := range r.Statuses {
			ph.Statuses[strconv.Itoa(k)] += v
		}
		if id != "" {
			ph.Members[id] += r.Succeeded
		} else {
			for k, v := range r.HeaderCounts {
				ph.Members[k] += v
			}
		}
		ttft = append(ttft, r.TTFT.Samples()...)
		itl = append(itl, r.ITL.Samples()...)
		e2e = append(e2e, r.E2E.Samples()...)
		elapsed = max(elapsed, r.Elapsed)
	}
	if elapsed > 0 {
		ph.Throughput = float64(ph.Succeeded) / elapsed.Seconds()
	}
	ph.TTFT, ph.ITL, ph.E2E = latency(ttft), latency(itl), latency(e2e)
	return ph
}

// zeroFailures passes when the phase ran and every request succeeded.
func zeroFailures(name string, ph Phase) Check {
	switch {
	case ph.Error != "":
		return fail(name, "the phase did not run: %s", ph.Error)
	case ph.Sent == 0:
		return fail(name, "no request was sent")
	case ph.Failed > 0:
		return fail(name, "%d of %d requests failed (%s)", ph.Failed, ph.Sent, describeCounts(ph.Errors))
	}
	return pass(name, "%d of %d requests succeeded", ph.Succeeded, ph.Sent)
}

// describeCounts writes counts as "k: n, …" in key order.
func describeCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// judge sets the verdict from the checks.
func (r *Report) judge() {
	r.Verdict = VerdictPass
	for _, c := range r.Checks {
		if !c.Pass {
			r.Verdict = VerdictFail
		}
	}
	if len(r.Checks) == 0 {
		r.Verdict = VerdictFail
	}
}

// Passed reports whether the verdict is pass.
func (r *Report) Passed() bool { return r.Verdict == VerdictPass }

// WriteFiles writes report.json, summary.txt and chart.svg into dir,
// creating it.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.WriteFile(filepath.Join(dir, ReportFile), b, 0o600); err != nil {
		return err
	}
	var sum strings.Builder
	if err := r.WriteSummary(&sum, sha256.Sum256(b)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte(sum.String()), 0o600); err != nil {
		return err
	}
	return writeChart(filepath.Join(dir, ChartFile), r)
}

// WriteSummary writes the one-screen text summary; digest is report.json's
// sha256.
func (r *Report) WriteSummary(w io.Writer, digest [sha256.Size]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Qualification of %s (generation %d, node %s), served model %q\n", r.Tier, r.Generation, r.Node, r.ServedModel)
	fmt.Fprintf(&b, "Evidence: %s", r.Evidence)
	if r.Evidence == EvidenceSynthetic {
		b.WriteString(" (an engine is enginesim: this proves the procedure and the router, not real engines)")
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttarget\tconcurrency\tsent\tfailed\treq/s\tTTFT p50\tTTFT p99\tE2E p50\tE2E p99\t")
	for _, ph := range r.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t\n", ph.Name, ph.Target, ph.Concurrency,
			ph.Sent, ph.Failed, ph.Throughput, ph.TTFT.P50, ph.TTFT.P99, ph.E2E.P50, ph.E2E.P99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s  %-10s %s\n", mark, c.Name, c.Detail)
	}
	fmt.Fprintf(&b, "\nVerdict: %s (report.json sha256 %s)\n", strings.ToUpper(r.Verdict), hex.EncodeToString(digest[:]))
	switch {
	case r.Passed() && r.Evidence == EvidenceReal:
		ns, name, _ := strings.Cut(r.Tier, "/")
		fmt.Fprintf(&b, "This run does not promote the tier. After reading the report, a person may record acceptance with:\n"+
			"  kubectl annotate replicatier -n %s %s %s=\"<who>:%s:%s\"\n",
			ns, name, v1alpha1.AnnotationAccepted, hex.EncodeToString(digest[:]), r.FinishedAt.Format("2006-01-02"))
	case r.Passed():
		b.WriteString("Synthetic evidence cannot promote a tier: qualify it again on its real engines.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
