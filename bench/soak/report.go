package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Invariant names, as the report and the exit message give them.
const (
	invLeases     = "no_leaked_lease"
	invAccounting = "lease_accounting"
	invOvershoot  = "no_ceiling_overshoot"
	invOutcomes   = "bytes_or_documented_error"
	invDuplicates = "one_engine_once"
	invResources  = "resources_back_to_baseline"
	invServing    = "router_still_serving"
	invDrains     = "drains_complete"
	invRequests   = "enough_requests"
	invFaults     = "enough_faults"
	invKillExcess = "kill_excess_within_threshold"
	invStreamEnds = "stream_outcomes_recorded"
	invPanics     = "router_never_panicked"
)

// invariant is one checked invariant.
type invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// report is the soak's JSON report.
type report struct {
	Seed            uint64              `json:"seed"`
	DurationSeconds float64             `json:"duration_seconds"`
	Engines         int                 `json:"engines"`
	Workers         int                 `json:"workers"`
	Requests        int                 `json:"requests"`
	Outcomes        outcomeResult       `json:"outcomes"`
	StreamOutcomes  streamOutcomeResult `json:"stream_outcomes"`
	Faults          map[string]int      `json:"faults"`
	FaultClasses    map[string]int      `json:"fault_classes"`
	Overshoot       overshootResult     `json:"overshoot"`
	Duplicates      duplicateResult     `json:"duplicates"`
	LeakedLeases    []string            `json:"leaked_leases"`
	AccountingErrs  []string            `json:"accounting_errors"`
	Kills           []killResult        `json:"kills"`
	KillExcess      int                 `json:"kill_excess"`
	Drains          map[string]int      `json:"drains"`
	Baseline        resources           `json:"baseline"`
	Final           resources           `json:"final"`
	Slack           resourceSlack       `json:"slack"`
	ConfigEpochs    int                 `json:"config_epochs"`
	// RouterPanics are the panics the router logged (panicLog): a
	// handler that panicked closed its client's connection unanswered.
	RouterPanics []string          `json:"router_panics,omitempty"`
	Invariants   []invariant       `json:"invariants"`
	Thresholds   map[string]int    `json:"thresholds"`
	Extra        map[string]string `json:"extra,omitempty"`
}

// faultClassOf maps each counted fault to its class: the nine kinds of
// fault the soak must inject (docs/RELIABILITY.md#fault-model).
var faultClassOf = map[string]string{
	faultClientDisconnect: "client_disconnect",
	faultResetMidBody:     "reset_mid_body",
	faultTruncateSSE:      "truncate_sse",
	faultStallIdle:        "stall",
	faultStallHeaders:     "stall",
	faultEndlessHeader:    "hostile_member",
	faultInformationalFx:  "hostile_member",
	chaosKill:             "engine_kill",
	chaosCeilingUp:        "reconfig",
	chaosCeilingDown:      "reconfig",
	chaosMemberAdd:        "reconfig",
	chaosMemberRemove:     "reconfig",
	chaosStrategy:         "reconfig",
	chaosQuiesceMember:    "quiesce",
	chaosQuiesceTier:      "quiesce",
	chaosDrainMember:      "drain",
	chaosDrainTier:        "drain",
}

// faultClasses lists the classes in report order.
var faultClasses = []string{
	"client_disconnect", "reset_mid_body", "truncate_sse", "stall", "hostile_member", "engine_kill", "reconfig", "quiesce", "drain",
}

// classify sums the fault counts by class; every class is present.
func classify(faults map[string]int) map[string]int {
	out := map[string]int{}
	for _, c := range faultClasses {
		out[c] = 0
	}
	for f, n := range faults {
		if c, ok := faultClassOf[f]; ok {
			out[c] += n
		}
	}
	return out
}

// failed returns the names of the invariants that failed.
func (r *report) failed() []string {
	var out []string
	for _, inv := range r.Invariants {
		if !inv.OK {
			out = append(out, inv.Name)
		}
	}
	return out
}

// summary is the one-line summary of the run.
func (r *report) summary() string {
	var b strings.Builder
	verdict := "PASS"
	if len(r.failed()) > 0 {
		verdict = "FAIL(" + strings.Join(r.failed(), ",") + ")"
	}
	fmt.Fprintf(&b, "soak %s: %d requests in %.0fs", verdict, r.Requests, r.DurationSeconds)
	b.WriteString(" [")
	for i, o := range slices.Sorted(maps.Keys(r.Outcomes.ByOutcome)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", o, r.Outcomes.ByOutcome[o])
	}
	b.WriteString("] faults [")
	for i, c := range faultClasses {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", c, r.FaultClasses[c])
	}
	fmt.Fprintf(&b, "] leaked=%d overshoot=%d (excused %d, peak live %d) duplicates=%d bad=%d kill_excess=%d/%d kills",
		len(r.LeakedLeases), r.Overshoot.Violations, r.Overshoot.Excused, maxValue(r.Overshoot.PeakLive),
		r.Duplicates.Duplicates, r.Outcomes.Bad, r.KillExcess, len(r.Kills))
	fmt.Fprintf(&b, " fds=%d->%d goroutines=%d->%d rss=%.1f->%.1fMiB",
		r.Baseline.FDs, r.Final.FDs, r.Baseline.Goroutines, r.Final.Goroutines,
		float64(r.Baseline.RSSKiB)/1024, float64(r.Final.RSSKiB)/1024)
	return b.String()
}

// maxValue returns the largest value of m, 0 when empty.
func maxValue(m map[string]int) int {
	out := 0
	for _, v := range m {
		out = max(out, v)
	}
	return out
}

// write writes the report as indented JSON to path, creating its directory.
func (r *report) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// writeRecords writes the driver's records, one JSON object a line, for
// looking into a failed run.
func writeRecords(path string, records []requestRecord) error {
	var b []byte
	for _, r := range records {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	return os.WriteFile(path, b, 0o600)
}
