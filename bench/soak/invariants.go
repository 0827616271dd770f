package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
)

// Check bounds.
const (
	// admitSlack is how long before a request's arrival at its engine the
	// router may have admitted it: a loopback hop and a scheduling delay on
	// a loaded machine. A ceiling counts for an arrival when its
	// configuration was possibly in force within this window.
	admitSlack = 250 * time.Millisecond
	// killDispatchWindow is the window after the engine's death showed (the
	// first failure after a kill) in which a request dispatched to the
	// killed member is counted as racing the death ("dispatched in the same
	// millisecond").
	killDispatchWindow = time.Millisecond
	// killHorizon bounds how long after a kill a failure on the killed
	// member is attributed to the kill: the engine's downtime plus two
	// readiness probe periods (2 s each).
	killHorizon = 5 * time.Second
	// releaseLagWindow is how close to an arrival an abandoned exchange of
	// the same member must have ended, as its client saw it, to excuse one
	// request over the ceiling: the router releases the lease of an
	// exchange that ends by a client disconnect or an idle timeout when its
	// body read fails, and closes the member connection just after, so the
	// engine serves the abandoned request for a few microseconds more
	// (docs/RELIABILITY.md#no-ceiling-overshoot). 100 ms covers scheduling
	// delays on a loaded 2-core machine.
	releaseLagWindow = 100 * time.Millisecond
	// maxExamples bounds the examples an invariant keeps for the report.
	maxExamples = 10
)

// engineRecord is one line of an engine's request log (docs/ENGINESIM.md#request-log).
type engineRecord struct {
	ID       string `json:"id"`
	T        int64  `json:"t"`
	Live     int    `json:"live"`
	Endpoint string `json:"endpoint"`
}

// configEpoch is one tier configuration the soak wrote: the router applied
// it at some time between Written and Applied (when the soak saw it in the
// admin API), and it stayed in force until the next epoch was applied.
type configEpoch struct {
	Written int64      `json:"written"`
	Applied int64      `json:"applied"`
	Config  tierConfig `json:"config"`
}

// ceilingBound returns the highest ceiling the member had in any
// configuration possibly in force at some time in [t-slack, t]: epoch i is
// possibly in force from its Written time until the next epoch's Applied
// time. A configuration without the member, or with it or the tier
// quiesced, counts as ceiling 0: no request may be admitted to it.
func ceilingBound(hist []configEpoch, member string, t int64, slack time.Duration) int {
	bound := 0
	for i, ep := range hist {
		if ep.Written > t {
			break
		}
		if i+1 < len(hist) && hist[i+1].Applied < t-slack.Nanoseconds() {
			continue
		}
		bound = max(bound, ep.Config.admitCeiling(member))
	}
	return bound
}

// overshootResult is the engine-side ceiling check.
type overshootResult struct {
	// Checked is the number of arrivals checked.
	Checked int `json:"checked"`
	// Violations is the number of arrivals whose live count exceeded the
	// ceiling bound plus their excuses.
	Violations int `json:"violations"`
	// Excused is the number of arrivals above the ceiling bound that
	// abandoned exchanges ending next to them explain (releaseLagWindow).
	Excused int `json:"excused"`
	// Strict makes excused arrivals violations too.
	Strict bool `json:"strict"`
	// PeakLive is the highest live count each engine logged.
	PeakLive map[string]int `json:"peak_live"`
	// Examples are some violations.
	Examples []string `json:"examples,omitempty"`
}

// abandonedEnds returns, per member, the sorted times at which exchanges
// abandoned by a client disconnect or an idle timeout (a stalled body) ended
// as their clients saw them.
func abandonedEnds(records []requestRecord) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range records {
		if r.Member != "" && (r.Outcome == outcomeClientDisconnect || r.Fault == faultStallIdle) {
			out[r.Member] = append(out[r.Member], r.End)
		}
	}
	for _, ends := range out {
		slices.Sort(ends)
	}
	return out
}

// countWithin counts the sorted times within window of t.
func countWithin(sorted []int64, t int64, window time.Duration) int {
	lo, _ := slices.BinarySearch(sorted, t-window.Nanoseconds())
	hi, _ := slices.BinarySearch(sorted, t+window.Nanoseconds()+1)
	return hi - lo
}

// checkOvershoot compares every arrival's live count, as its engine counted
// it, with the ceiling bound of its member at that time. An arrival above
// the bound is excused, unless strict, by as many abandoned exchanges of the
// member as ended within releaseLagWindow of it
// (docs/RELIABILITY.md#no-ceiling-overshoot).
func checkOvershoot(logs map[string][]engineRecord, hist []configEpoch, slack time.Duration,
	abandoned map[string][]int64, strict bool,
) overshootResult {
	res := overshootResult{PeakLive: map[string]int{}, Strict: strict}
	for _, member := range slices.Sorted(maps.Keys(logs)) {
		for _, r := range logs[member] {
			res.Checked++
			res.PeakLive[member] = max(res.PeakLive[member], r.Live)
			b := ceilingBound(hist, member, r.T, slack)
			if r.Live <= b {
				continue
			}
			if !strict && b > 0 && r.Live <= b+countWithin(abandoned[member], r.T, releaseLagWindow) {
				res.Excused++
				continue
			}
			{
				res.Violations++
				if len(res.Examples) < maxExamples {
					res.Examples = append(res.Examples, fmt.Sprintf("%s: request %s arrived with %d live, ceiling at most %d",
						member, r.ID, r.Live, b))
				}
			}
		}
	}
	return res
}

// duplicateResult is the one-engine-once check.
type duplicateResult struct {
	// Duplicates is the number of request ids logged more than once, by one
	// engine or several.
	Duplicates int `json:"duplicates"`
	// Unidentified is the number of arrivals without a request id.
	Unidentified int `json:"unidentified"`
	// Examples are some duplicated ids with the engines that logged them.
	Examples []string `json:"examples,omitempty"`
}

// checkDuplicates finds request ids that reached two engines or one engine
// twice.
func checkDuplicates(logs map[string][]engineRecord) duplicateResult {
	var res duplicateResult
	seen := map[string][]string{}
	for _, member := range slices.Sorted(maps.Keys(logs)) {
		for _, r := range logs[member] {
			if r.ID == "" {
				res.Unidentified++
				continue
			}
			seen[r.ID] = append(seen[r.ID], member)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		if ms := seen[id]; len(ms) > 1 {
			res.Duplicates++
			if len(res.Examples) < maxExamples {
				res.Examples = append(res.Examples, id+" reached "+strings.Join(ms, ", "))
			}
		}
	}
	return res
}

// checkLeases lists every tier and member of the capacity view that still
// holds a lease, every tier whose active count is not the sum of its
// members', and every tier with a request still waiting in its queue. An
// empty list means no lease leaked and no request was left waiting.
func checkLeases(v adminapi.CapacityView) []string {
	var out []string
	for _, t := range v.Tiers {
		if t.Queue.Waiting != 0 {
			out = append(out, fmt.Sprintf("%s has %d waiting", t.Tier, t.Queue.Waiting))
		}
		sum := 0
		for _, m := range t.Members {
			sum += m.Active
			if m.Active != 0 {
				out = append(out, fmt.Sprintf("%s member %s holds %d", t.Tier, m.ID, m.Active))
			}
		}
		if t.Active != sum {
			out = append(out, fmt.Sprintf("%s active %d but its members hold %d", t.Tier, t.Active, sum))
		} else if t.Active != 0 {
			out = append(out, fmt.Sprintf("%s holds %d", t.Tier, t.Active))
		}
	}
	return out
}

// checkAccounting lists the tiers whose active count is not the sum of
// their members' or is negative: the continuous lease check while requests
// are in flight.
func checkAccounting(v adminapi.CapacityView) []string {
	var out []string
	for _, t := range v.Tiers {
		sum := 0
		for _, m := range t.Members {
			if m.Active < 0 {
				out = append(out, fmt.Sprintf("%s member %s active %d", t.Tier, m.ID, m.Active))
			}
			sum += m.Active
		}
		if t.Active != sum {
			out = append(out, fmt.Sprintf("%s active %d but its members hold %d", t.Tier, t.Active, sum))
		}
	}
	return out
}

// killEvent is one engine kill.
type killEvent struct {
	Member    string `json:"member"`
	Strategy  string `json:"strategy"`  // the tier's strategy at the kill
	At        int64  `json:"at"`        // SIGKILL sent, Unix nanoseconds
	Restarted int64  `json:"restarted"` // listening again
}

// killResult is what the soak measured around one kill. Faulted requests
// are left out: their failures are injected.
type killResult struct {
	killEvent
	// Died is when the engine's death showed to the router: the end of
	// the first failed request on the member after the kill that ejected
	// the member (its decision record names an ejection: connection
	// refused, reset on a fresh connection, closed after taking the
	// request), else of the first failed request, else the kill itself.
	// A reset of a reused connection proves nothing to the router (a live
	// engine's idle close resets one too, docs/ROUTER.md section 2.1), so
	// the request after it may still be sent and be the one refused.
	// Faulted requests are left out: every fault class fails its request
	// by itself, so a faulted request that ended just after the kill says
	// nothing of the engine's death. SIGKILL takes a few milliseconds to
	// end a process; until then the engine serves and nothing can know it
	// is dying.
	Died int64 `json:"died"`
	// InFlight is the number of requests on the member sent before the
	// kill and ended after it.
	InFlight int `json:"in_flight"`
	// Dispatched is the number of requests on the member sent from the
	// kill until killDispatchWindow after Died: the requests admitted
	// while the engine was dying and in the same millisecond as the
	// first failure, before any could report it.
	Dispatched int `json:"dispatched"`
	// Failed is the number of requests on the member that failed (502,
	// 504 or an aborted body), ended after the kill and before the next
	// kill, and were sent before killHorizon passed.
	Failed int `json:"failed"`
	// Excess is Failed minus InFlight and Dispatched, at least 0: the
	// requests the router sent to a member it could have known was dead.
	Excess int `json:"excess"`
}

// analyzeKills counts, for every kill, the failures on the killed member
// against the requests in flight on it at the kill. ejected holds the
// requests whose decision record says they ejected their member.
func analyzeKills(records []requestRecord, kills []killEvent, ejected map[string]bool) []killResult {
	out := make([]killResult, 0, len(kills))
	for i, k := range kills {
		horizon := k.At + killHorizon.Nanoseconds()
		next := int64(math.MaxInt64) // failures from the next kill on are that kill's.
		if i+1 < len(kills) {
			horizon = min(horizon, kills[i+1].At)
			next = kills[i+1].At
		}
		res := killResult{killEvent: k, Died: k.At}
		first, firstEjected := int64(-1), int64(-1)
		for _, r := range records {
			if r.Member != k.Member || r.Fault != "" || !r.failed() || r.End < k.At || r.End >= next || r.Start >= horizon {
				continue
			}
			if first < 0 || r.End < first {
				first = r.End
			}
			if ejected[r.ID] && (firstEjected < 0 || r.End < firstEjected) {
				firstEjected = r.End
			}
		}
		switch {
		case firstEjected >= 0:
			res.Died = firstEjected
		case first >= 0:
			res.Died = first
		}
		for _, r := range records {
			if r.Member != k.Member || r.Fault != "" {
				continue
			}
			switch {
			case r.Start < k.At && r.End >= k.At:
				res.InFlight++
			case r.Start >= k.At && r.Start <= res.Died+killDispatchWindow.Nanoseconds():
				res.Dispatched++
			}
			if r.failed() && r.End >= k.At && r.End < next && r.Start < horizon {
				res.Failed++
			}
		}
		res.Excess = max(0, res.Failed-res.InFlight-res.Dispatched)
		out = append(out, res)
	}
	return out
}

// outcomeResult is the every-client-got-bytes-or-a-documented-error check.
type outcomeResult struct {
	// ByOutcome counts requests by outcome.
	ByOutcome map[string]int `json:"by_outcome"`
	// Bad is the number of requests whose answer was neither the engine's
	// bytes nor a documented error: bad content or status, transport
	// errors, driver timeouts, aborts no fault or kill explains, and 200s
	// no engine logged.
	Bad int `json:"bad"`
	// Examples are some bad requests.
	Examples []string `json:"examples,omitempty"`
}

// checkOutcomes classifies the driver's records. An aborted body is
// documented when its request carried a mid-body or stall fault or its
// member was killed while it was in flight; a 200 must have reached an
// engine that logged it; a hostile member's request an engine logged must
// get the router's 502 upstream_unavailable. An example names the
// request's fault, whether an engine logged it and the stream outcome the
// router recorded for it (ends), so that a failure can be explained from
// the report.
func checkOutcomes(records []requestRecord, kills []killEvent, logged map[string]bool, ends map[string]string) outcomeResult {
	res := outcomeResult{ByOutcome: map[string]int{}}
	bad := func(r requestRecord, why string) {
		res.Bad++
		if len(res.Examples) < maxExamples {
			end, ok := ends[r.ID]
			if !ok {
				end = "none"
			}
			res.Examples = append(res.Examples, fmt.Sprintf("%s (%s; fault %q, engine logged %t, router end %s): %s %s",
				r.ID, r.Outcome, r.Fault, logged[r.ID], end, why, r.Detail))
		}
	}
	for _, r := range records {
		res.ByOutcome[r.Outcome]++
		switch r.Outcome {
		case outcomeBadContent, outcomeBadStatus, outcomeTransportError, outcomeDriverTimeout:
			bad(r, "undocumented answer")
		case outcomeAborted:
			if !abortExplained(r, kills) {
				bad(r, "aborted without a fault or a kill")
			}
		case outcomeOK:
			if !logged[r.ID] {
				bad(r, "answered 200 but no engine logged it")
			}
		}
		if hostile := r.Fault == faultEndlessHeader || r.Fault == faultInformationalFx; hostile && logged[r.ID] &&
			r.Outcome != outcomeErrorPrefix+"upstream_unavailable" {
			bad(r, "a hostile member's answer was not 502 upstream_unavailable")
		}
	}
	return res
}

// abortExplained reports whether an aborted body is one the soak caused.
func abortExplained(r requestRecord, kills []killEvent) bool {
	switch r.Fault {
	case faultResetMidBody, faultTruncateSSE, faultStallIdle:
		return true
	}
	return killedInFlight(r, kills)
}

// killedInFlight reports whether r's member was killed while r was in
// flight.
func killedInFlight(r requestRecord, kills []killEvent) bool {
	for _, k := range kills {
		if k.Member == r.Member && k.At >= r.Start && k.At <= r.End {
			return true
		}
	}
	return false
}

// The router's stream outcomes the soak checks (docs/ROUTER.md#3-terminal-paths).
const (
	endComplete  = "complete"
	endTruncated = "truncated"
)

// streamOutcomeResult is the check of the router's own decision records
// against what the soak did to each request.
type streamOutcomeResult struct {
	// Records is the number of decision records read from the router's
	// decision log file.
	Records int `json:"records"`
	// ByEnd counts the driver's requests that have a record, per the
	// record's stream outcome.
	ByEnd map[string]int `json:"by_end"`
	// TruncateFaults is the number of truncate_sse requests an engine
	// logged (it cut them) that have a record.
	TruncateFaults int `json:"truncate_faults"`
	// Bad is the number of records that contradict the request: a
	// truncate_sse request an engine cut recorded other than truncated
	// (complete never; another outcome only when its member was killed in
	// flight), or a request whose client got the engine's whole answer
	// recorded other than complete.
	Bad int `json:"bad"`
	// Examples are some contradicting records.
	Examples []string `json:"examples,omitempty"`
}

// checkStreamOutcomes compares the router's stream outcome of each request
// (ends, by request id; a request without a record is not checked) with
// what the soak did to it. It also fails when truncate_sse requests were
// cut and none of them has a record: the log was not read.
func checkStreamOutcomes(records []requestRecord, ends map[string]string, kills []killEvent, logged map[string]bool) streamOutcomeResult {
	res := streamOutcomeResult{Records: len(ends), ByEnd: map[string]int{}}
	bad := func(r requestRecord, end, why string) {
		res.Bad++
		if len(res.Examples) < maxExamples {
			res.Examples = append(res.Examples, fmt.Sprintf("%s (%s, fault %q) recorded %s: %s", r.ID, r.Outcome, r.Fault, end, why))
		}
	}
	cut := 0
	for _, r := range records {
		truncated := r.Fault == faultTruncateSSE && logged[r.ID]
		if truncated {
			cut++
		}
		end, ok := ends[r.ID]
		if !ok {
			continue
		}
		res.ByEnd[end]++
		switch {
		case truncated:
			res.TruncateFaults++
			if end == endComplete || end != endTruncated && !killedInFlight(r, kills) {
				bad(r, end, "the engine cut the stream, want truncated")
			}
		case r.Outcome == outcomeOK && end != endComplete:
			bad(r, end, "the client got the whole answer, want complete")
		}
	}
	if cut > 0 && res.TruncateFaults == 0 {
		res.Bad++
		res.Examples = append(res.Examples, fmt.Sprintf("none of the %d cut truncate_sse requests has a decision record", cut))
	}
	return res
}

// resources is a sample of the router process.
type resources struct {
	Goroutines int   `json:"goroutines"`
	FDs        int   `json:"fds"`
	RSSKiB     int64 `json:"rss_kib"`
}

// resourceSlack bounds how far the final sample may be from the baseline.
type resourceSlack struct {
	Goroutines int   `json:"goroutines"`
	FDs        int   `json:"fds"`
	RSSKiB     int64 `json:"rss_kib"`
}

// checkResources lists how far the final sample grew over the baseline
// beyond slack: goroutines, fds and RSS at most slack above. The baseline is
// the quiet router's floor (quietSample), so the final sample is not
// compared below it: fewer goroutines or fds than the floor leak nothing.
func checkResources(base, final resources, slack resourceSlack) []string {
	var out []string
	if final.Goroutines-base.Goroutines > slack.Goroutines {
		out = append(out, fmt.Sprintf("goroutines %d -> %d", base.Goroutines, final.Goroutines))
	}
	if final.FDs-base.FDs > slack.FDs {
		out = append(out, fmt.Sprintf("fds %d -> %d", base.FDs, final.FDs))
	}
	if final.RSSKiB-base.RSSKiB > slack.RSSKiB {
		out = append(out, fmt.Sprintf("rss %d KiB -> %d KiB", base.RSSKiB, final.RSSKiB))
	}
	return out
}
