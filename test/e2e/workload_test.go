package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/loadgen"
	"github.com/sluice-dev/sluice/internal/pressure"
)

// Workload of the integrated test.
const (
	// workloadSeed seeds every random choice of the test: the error
	// engine's decisions and the load generator's reservoir.
	workloadSeed = 7
	// rotationRounds is how many times each member is selected in the
	// sequential rotation checks.
	rotationRounds = 10
	// loadWorkers and loadRequests shape the concurrent load on the
	// Capacity tier: twice its combined ceiling of 2+4+6, so the ceilings
	// bind and the excess is refused.
	loadWorkers  = 24
	loadRequests = 360
	// stallWindow is how long requests are sent to the tier with the
	// stalled metrics endpoint: more than two refresh cycles of the
	// pressure cache (a fetch held for pressure.FetchTimeout, then
	// pressure.RefreshInterval until the next), so some requests arrive
	// while a fetch of the stalled member is running.
	stallWindow = 2*(pressure.FetchTimeout+pressure.RefreshInterval) + 500*time.Millisecond
	// stallRequests bounds the requests of the stall window.
	stallRequests = 400
	// stallLatencyBound bounds one request to the stalled tier. A request
	// that waited for a running fetch would wait up to
	// pressure.FetchTimeout (1 s); the requests are spread over the whole
	// window, so some start right after a fetch began. Half the fetch
	// timeout separates the two: an admitted request takes tens of
	// milliseconds here (5 ms to first token, 8 tokens at 1 ms).
	stallLatencyBound = pressure.FetchTimeout / 2
	// slowTokens and the drain engines' 25 ms inter-token latency make a
	// drain-tier stream last about a second, long enough to be in flight
	// while the quiesce is applied and the drain waits.
	slowTokens = 40
	// drainWait is the drain endpoint's timeout parameter.
	drainWait = "20s"
)

// TestIntegratedWorkload runs one router over eight engines and, in one
// run, checks the scheduler's placement against the ranking rules, the
// ceilings as the engines count them, a member and a tier drain under
// load, admission while an engine's /metrics stalls, an upstream error
// relayed once, and the decision log against the engines' request logs.
func TestIntegratedWorkload(t *testing.T) {
	started := time.Now()
	logs := t.TempDir()
	reqLog := func(name string) []string {
		return []string{"--request-log", filepath.Join(logs, name+".jsonl")}
	}
	// The Capacity and RoundRobin tiers share three engines with enough
	// slots that they never queue; the stream fault holds a request open.
	capArgs := []string{"--max-num-seqs", "64", "--ttft-base", "20ms", "--itl-base", "2ms", "--allow-fault-header"}
	a := startEngine(t, "cap-a", append(capArgs, reqLog("cap-a")...)...)
	b := startEngine(t, "cap-b", append(capArgs, reqLog("cap-b")...)...)
	c := startEngine(t, "cap-c", append(capArgs, reqLog("cap-c")...)...)
	slowArgs := []string{"--itl-base", "25ms"}
	f := startEngine(t, "drain-f", append(slowArgs, reqLog("drain-f")...)...)
	g := startEngine(t, "drain-g", append(slowArgs, reqLog("drain-g")...)...)
	// The longest metrics delay enginesim accepts, on both members of the
	// tier: the router's fetches give up after pressure.FetchTimeout, so
	// every scrape stalls and occupies one of the pressure cache's two
	// workers, and both members' pressure stays unknown or failed (which
	// rank alike), so the rotation spreads the requests over both.
	stalled := []string{"--metrics-delay", "10m"}
	d := startEngine(t, "stall-d", append(stalled, reqLog("stall-d")...)...)
	e := startEngine(t, "stall-e", append(stalled, reqLog("stall-e")...)...)
	x := startEngine(t, "error-x", append([]string{"--error-rate", "1", "--seed", fmt.Sprint(workloadSeed)}, reqLog("error-x")...)...)

	ceilings := []int32{2, 4, 6}
	capMembers := []member{{"a", a, ceilings[0]}, {"b", b, ceilings[1]}, {"c", c, ceilings[2]}}
	capTier := tier{name: "wl-capacity", alias: "wl-capacity", strategy: sluicev1.StrategyCapacity, members: capMembers, noMetrics: true}
	rrTier := tier{name: "wl-rr", alias: "wl-rr", strategy: sluicev1.StrategyRoundRobin, members: capMembers, noMetrics: true}
	drainTier := tier{name: "wl-drain", alias: "wl-drain", strategy: sluicev1.StrategyRoundRobin, members: []member{{"f", f, 3}, {"g", g, 3}}}
	stallTier := tier{name: "wl-stall", alias: "wl-stall", strategy: sluicev1.StrategyCapacity, members: []member{{"d", d, 4}, {"e", e, 4}}}
	errTier := tier{name: "wl-error", alias: "wl-error", members: []member{{"x", x, 2}}}
	decisions := filepath.Join(logs, "decisions.jsonl")
	r := startRouterArgs(t, []string{"--decision-log-file", decisions, "--tiers-poll-interval", "100ms"},
		capTier, rrTier, drainTier, stallTier, errTier)
	t.Logf("stack up after %v", time.Since(started).Round(time.Millisecond))

	t.Run("placement", func(t *testing.T) { checkPlacement(t, r, capTier) })
	t.Run("rotation", func(t *testing.T) {
		checkRotation(t, r, capTier)
		checkRotation(t, r, rrTier)
	})
	t.Run("load", func(t *testing.T) { checkLoad(t, r, capTier) })
	t.Run("stalled-metrics", func(t *testing.T) { checkStalledMetrics(t, r, stallTier) })
	t.Run("drain", func(t *testing.T) { checkDrain(t, r, drainTier) })
	t.Run("upstream-error", func(t *testing.T) { checkUpstreamError(t, r, errTier, filepath.Join(logs, "error-x.jsonl")) })
	t.Run("evidence", func(t *testing.T) {
		engines := map[string]*engine{"a": a, "b": b, "c": c, "f": f, "g": g, "d": d, "e": e, "x": x}
		checkEvidence(t, decisions, logs, engines)
	})
	t.Logf("integrated workload took %v", time.Since(started).Round(time.Millisecond))
}

// predictCapacity returns the member a Capacity tier selects when every
// member's pressure is unknown, by the ranking rules of docs/SCORING.md:
// members at their ceiling are dropped; the rest are ordered by local
// ratio active/ceiling (compared by cross-products), then by rotating
// rank (index − cursor) mod N. It returns -1 when none is below its
// ceiling.
func predictCapacity(active []int, ceilings []int32, cursor int) int {
	n, best := len(active), -1
	for i := range n {
		if active[i] >= int(ceilings[i]) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		lhs, rhs := active[i]*int(ceilings[best]), active[best]*int(ceilings[i])
		if lhs < rhs || (lhs == rhs && (i-cursor+n)%n < (best-cursor+n)%n) {
			best = i
		}
	}
	return best
}

// chatBody is a chat completion request for alias.
func chatBody(alias string, maxTokens int, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, alias, maxTokens, stream)
}

// openChat sends a chat completion and returns the response with its body
// unread; cancelling ctx abandons it.
func openChat(ctx context.Context, r *router, body string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	return httpClient.Do(req)
}

// streamResult is a chat stream read to its end.
type streamResult struct {
	member string
	chunks int  // data lines other than [DONE]
	done   bool // data: [DONE] was read
	err    error
}

// readStream reads resp's SSE body to its end.
func readStream(resp *http.Response) streamResult {
	defer func() { _ = resp.Body.Close() }()
	res := streamResult{member: resp.Header.Get("X-Sluice-Member")}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxBody))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "data: [DONE]":
			res.done = true
		case strings.HasPrefix(line, "data: "):
			res.chunks++
		}
	}
	res.err = sc.Err()
	return res
}

// errorCode returns the code of an OpenAI error body.
func errorCode(body []byte) string {
	var v struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Error.Code
}

// checkPlacement holds streams open on the Capacity tier one after the
// other, so each decision sees exactly the leases of the streams before
// it: the member of every admission must be the one the ranking rules
// predict, the tier must fill to exactly its members' ceilings, and one
// request more is refused with 503 capacity_exhausted. Nothing is released
// during the check, so the prediction is exact: the tolerance is zero.
func checkPlacement(t *testing.T, r *router, tr tier) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ceilings := make([]int32, len(tr.members))
	for i, m := range tr.members {
		ceilings[i] = m.ceiling
	}
	active := make([]int, len(tr.members))
	cursor, total := 0, 0
	for _, m := range tr.members {
		total += int(m.ceiling)
	}
	var held []*http.Response
	defer func() {
		cancel()
		for _, resp := range held {
			_ = resp.Body.Close()
		}
		r.awaitActive(t, tr.key(), 0)
	}()
	var got, want []string
	for range total {
		i := predictCapacity(active, ceilings, cursor)
		resp, err := openChat(ctx, r, chatBody(tr.alias, 16, true), http.Header{"X-Enginesim-Fault": {"stall"}}) //nolint:bodyclose // held open until the deferred cleanup closes it.
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, resp) //nolint:bodyclose // closed by the deferred cleanup.
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("held request %d: status %d", len(held), resp.StatusCode)
		}
		got = append(got, resp.Header.Get("X-Sluice-Member"))
		want = append(want, tr.members[i].id)
		active[i]++
		cursor = (i + 1) % len(tr.members)
	}
	t.Logf("placement of %d held streams: %v", total, got)
	if !slices.Equal(got, want) {
		t.Fatalf("placement: got members %v, the ranking rules predict %v", got, want)
	}
	for i, m := range tr.members {
		if active[i] != int(m.ceiling) {
			t.Errorf("member %s holds %d streams, ceiling %d", m.id, active[i], m.ceiling)
		}
		if s := m.engine.stats(t); s.InFlight != int(m.ceiling) || s.MaxInFlight > int(m.ceiling) {
			t.Errorf("%s: engine in flight %d, max %d, ceiling %d", m.engine.Name(), s.InFlight, s.MaxInFlight, m.ceiling)
		}
	}
	resp, err := postJSON(ctx, r.baseURL()+"/chat/completions", chatBody(tr.alias, 16, false))
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != http.StatusServiceUnavailable || errorCode(resp.body) != "capacity_exhausted" || resp.header.Get("Retry-After") != "1" {
		t.Fatalf("request beyond the ceilings: %d %s (Retry-After %q), want 503 capacity_exhausted",
			resp.status, resp.body, resp.header.Get("Retry-After"))
	}
}

// checkRotation sends requests one at a time, each after the previous
// one's lease was released: with every member idle and every pressure
// unknown, both strategies select the members in rotation, so each is
// selected exactly rotationRounds times, in member order.
func checkRotation(t *testing.T, r *router, tr tier) {
	counts := map[string]int{}
	for n := range rotationRounds * len(tr.members) {
		resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(tr.alias, 4, false))
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != http.StatusOK {
			t.Fatalf("%s request %d: %d %s", tr.alias, n, resp.status, resp.body)
		}
		m := resp.header.Get("X-Sluice-Member")
		// In a rotation, whatever member it starts at, the n-th selection
		// goes to a member selected n/N times before.
		if counts[m] != n/len(tr.members) {
			t.Fatalf("%s request %d went to %s, counts so far %v: not a rotation", tr.alias, n, m, counts)
		}
		counts[m]++
		// The client may read the end of the body before the router
		// releases the lease; waiting for the release keeps every member
		// idle at the next decision on a loaded machine too.
		r.awaitActive(t, tr.key(), 0)
	}
	t.Logf("%s rotation: %v", tr.alias, counts)
	for _, m := range tr.members {
		if counts[m.id] != rotationRounds {
			t.Errorf("%s: member %s selected %d times, want %d (all: %v)", tr.alias, m.id, counts[m.id], rotationRounds, counts)
		}
	}
}

// checkLoad drives loadWorkers streaming clients through the Capacity
// tier: every request succeeds or is refused with 503, and the engines'
// own high-water marks (since the engines started, the placement check
// included) never exceed the members' ceilings.
func checkLoad(t *testing.T, r *router, tr tier) {
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		BaseURL:        r.baseURL(),
		Model:          tr.alias,
		MaxTokens:      16,
		Concurrency:    loadWorkers,
		Requests:       loadRequests,
		Seed:           workloadSeed,
		CountHeader:    "X-Sluice-Member",
		RequestTimeout: waitTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := res.Statuses[http.StatusServiceUnavailable]
	t.Logf("load: %d succeeded, %d refused, members %v, in %v", res.Succeeded, refused, res.HeaderCounts, res.Elapsed.Round(time.Millisecond))
	if res.Sent != loadRequests || res.Succeeded+refused != loadRequests || res.Failed() != refused {
		t.Fatalf("every request must succeed or be refused: sent %d, succeeded %d, statuses %v, errors %v",
			res.Sent, res.Succeeded, res.Statuses, res.Errors)
	}
	if res.Succeeded == 0 {
		t.Fatal("no request succeeded")
	}
	r.awaitActive(t, tr.key(), 0)
	for _, m := range tr.members {
		s := m.engine.stats(t)
		if s.MaxInFlight > int(m.ceiling) || s.InFlight != 0 {
			t.Errorf("%s (member %s): engine max in flight %d, now %d, ceiling %d", m.engine.Name(), m.id, s.MaxInFlight, s.InFlight, m.ceiling)
		}
	}
}

// engineDebug is the part of /debug/stats with the per-endpoint counts.
type engineDebug struct {
	InFlight      int               `json:"in_flight"`
	TotalRequests uint64            `json:"total_requests"`
	Requests      map[string]uint64 `json:"requests"`
}

// memberPressure returns a member's pressure freshness from the capacity
// view.
func memberPressure(t *testing.T, r *router, key, id string) string {
	t.Helper()
	var v struct {
		Tiers []struct {
			Tier    string `json:"tier"`
			Members []struct {
				ID       string `json:"id"`
				Pressure *struct {
					Freshness string `json:"freshness"`
				} `json:"pressure"`
			} `json:"members"`
		} `json:"tiers"`
	}
	if err := getJSON("http://"+r.admin+"/admin/v1/capacity", &v); err != nil {
		t.Fatal(err)
	}
	for _, tr := range v.Tiers {
		for _, m := range tr.Members {
			if tr.Tier == key && m.ID == id && m.Pressure != nil {
				return m.Pressure.Freshness
			}
		}
	}
	t.Fatalf("no pressure for %s member %s", key, id)
	return ""
}

// checkStalledMetrics sends requests one after the other to a Capacity
// tier whose members answer /metrics only after 10 minutes, for
// stallWindow (at most stallRequests): every request is admitted, reaches
// either member and completes within stallLatencyBound, while the router
// keeps starting scrapes that never complete.
func checkStalledMetrics(t *testing.T, r *router, tr tier) {
	scrapes := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, mb := range tr.members {
			var s engineDebug
			if err := getJSON(mb.engine.url()+"/debug/stats", &s); err != nil {
				t.Fatal(err)
			}
			m[mb.id] = s.Requests["metrics"]
		}
		return m
	}
	before := scrapes()
	counts := map[string]int{}
	var worst time.Duration
	deadline := time.Now().Add(stallWindow)
	for n := 0; n < stallRequests && time.Now().Before(deadline); n++ {
		t0 := time.Now()
		resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(tr.alias, 8, false))
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != http.StatusOK {
			t.Fatalf("request %d to the stalled tier: %d %s", n, resp.status, resp.body)
		}
		if took > stallLatencyBound {
			t.Fatalf("request %d to the stalled tier took %v, bound %v: admission waited for a scrape", n, took, stallLatencyBound)
		}
		worst = max(worst, took)
		counts[resp.header.Get("X-Sluice-Member")]++
	}
	after := scrapes()
	t.Logf("stalled metrics: requests per member %v, slowest %v, scrapes started before %v, after %v", counts, worst, before, after)
	for _, mb := range tr.members {
		// One scrape per refresh cycle: the window spans two.
		if n := after[mb.id] - before[mb.id]; n < 2 {
			t.Errorf("the router started %d scrapes of member %s during the window, want at least 2", n, mb.id)
		}
		if p := memberPressure(t, r, tr.key(), mb.id); p == "fresh" {
			t.Errorf("member %s's stalled pressure reads fresh", mb.id)
		}
		if counts[mb.id] == 0 {
			t.Errorf("requests per member %v: every stalled member must keep admitting", counts)
		}
	}
	r.awaitActive(t, tr.key(), 0)
}

// capacityState returns a tier's state and its members' states from the
// capacity view.
func capacityState(r *router, key string) (string, map[string]string, error) {
	var v adminapi.CapacityView
	if err := getJSON("http://"+r.admin+"/admin/v1/capacity", &v); err != nil {
		return "", nil, err
	}
	for _, tr := range v.Tiers {
		if tr.Tier == key {
			ms := map[string]string{}
			for _, m := range tr.Members {
				ms[m.ID] = m.State
			}
			return tr.State, ms, nil
		}
	}
	return "", nil, fmt.Errorf("tier %s not in the capacity view", key)
}

// drainCall posts to the drain endpoint of the tier (of one member when
// id is not empty).
func drainCall(r *router, key, id string) (rawResponse, error) {
	url := "http://" + r.admin + "/admin/v1/tiers/" + key + "/drain?timeout=" + drainWait
	if id != "" {
		url += "&member=" + id
	}
	return postJSON(context.Background(), url, "")
}

// startSlow opens a slow stream on the tier, waits for its headers and
// returns the member that serves it; the stream is read to its end (and
// closed) in the background.
func startSlow(t *testing.T, r *router, alias string) (string, chan streamResult) {
	t.Helper()
	resp, err := openChat(context.Background(), r, chatBody(alias, slowTokens, true), nil) //nolint:bodyclose // readStream closes it in the background.
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		t.Fatalf("slow stream: status %d", resp.StatusCode)
	}
	done := make(chan streamResult, 1)
	go func() { done <- readStream(resp) }()
	return resp.Header.Get("X-Sluice-Member"), done
}

// awaitStream waits for a stream's end and checks it completed: every
// token, the finish chunk and [DONE].
func awaitStream(t *testing.T, done chan streamResult, member string) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case res := <-done:
		// The role chunk, one chunk per token and the finish chunk.
		if res.err != nil || !res.done || res.chunks != slowTokens+2 || res.member != member {
			t.Errorf("in-flight stream on %s: member %s, %d chunks, [DONE] %t, error %v; want %d chunks and [DONE]",
				member, res.member, res.chunks, res.done, res.err, slowTokens+2)
		}
	case <-timer.C:
		t.Fatalf("in-flight stream on %s did not end within %v", member, waitTimeout)
	}
}

// checkDrain quiesces member g through the tiers file while a stream runs
// on each member, drains g through the admin endpoint while new requests
// keep arriving, then quiesces and drains the whole tier the same way. In
// flight streams complete; nothing new reaches a quiesced scope; refusals
// carry 409 not_quiesced and 503 tier_quiesced.
func checkDrain(t *testing.T, r *router, tr tier) {
	f, g := tr.members[0], tr.members[1]
	mf, doneF := startSlow(t, r, tr.alias)
	mg, doneG := startSlow(t, r, tr.alias)
	if mf != f.id || mg != g.id {
		t.Fatalf("slow streams went to %s and %s, want %s and %s", mf, mg, f.id, g.id)
	}

	tr.quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{g.id: "maintenance"}}
	r.writeTier(t, tr)
	eventually(t, "member g quiesced", func() (bool, string) {
		_, ms, err := capacityState(r, tr.key())
		if err != nil {
			return false, err.Error()
		}
		return ms[g.id] == "quiesced", fmt.Sprintf("members %v", ms)
	})
	gBefore := g.engine.stats(t).TotalRequests
	if resp, err := drainCall(r, tr.key(), f.id); err != nil || resp.status != http.StatusConflict || errorCode(resp.body) != "not_quiesced" {
		t.Fatalf("drain of the admitting member: %+v %v, want 409 not_quiesced", resp, err)
	}
	drained := make(chan rawResponse, 1)
	go func() {
		resp, err := drainCall(r, tr.key(), g.id)
		if err != nil {
			resp = rawResponse{status: -1, body: []byte(err.Error())}
		}
		drained <- resp
	}()
	for n := range 3 {
		resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(tr.alias, 2, false))
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != http.StatusOK || resp.header.Get("X-Sluice-Member") != f.id {
			t.Fatalf("request %d during g's drain: %d, member %q, want 200 from %s", n, resp.status, resp.header.Get("X-Sluice-Member"), f.id)
		}
	}
	resp := awaitDrain(t, drained)
	if !isDrained(resp, tr.key(), g.id) {
		t.Fatalf("drain of g: %d %s", resp.status, resp.body)
	}
	awaitStream(t, doneG, g.id)
	awaitStream(t, doneF, f.id)
	if got := g.engine.stats(t).TotalRequests; got != gBefore {
		t.Errorf("the quiesced member's engine served %d requests after the quiesce", got-gBefore)
	}

	// The whole tier, with a stream running on f.
	if mf, doneF = startSlow(t, r, tr.alias); mf != f.id {
		t.Fatalf("slow stream went to %s, want %s", mf, f.id)
	}
	tr.quiesce = &sluicev1.QuiesceSpec{Tier: "rollout", Members: map[string]sluicev1.QuiesceReason{g.id: "maintenance"}}
	r.writeTier(t, tr)
	eventually(t, "tier quiesced", func() (bool, string) {
		st, _, err := capacityState(r, tr.key())
		if err != nil {
			return false, err.Error()
		}
		return st == "quiesced", "state " + st
	})
	fBefore := f.engine.stats(t).TotalRequests
	go func() {
		resp, err := drainCall(r, tr.key(), "")
		if err != nil {
			resp = rawResponse{status: -1, body: []byte(err.Error())}
		}
		drained <- resp
	}()
	refused, err := postJSON(context.Background(), r.baseURL()+"/chat/completions", chatBody(tr.alias, 2, false))
	if err != nil {
		t.Fatal(err)
	}
	if refused.status != http.StatusServiceUnavailable || errorCode(refused.body) != "tier_quiesced" || refused.header.Get("Retry-After") != "1" {
		t.Fatalf("request to the quiesced tier: %d %s, want 503 tier_quiesced", refused.status, refused.body)
	}
	resp = awaitDrain(t, drained)
	if !isDrained(resp, tr.key(), "") {
		t.Fatalf("drain of the tier: %d %s", resp.status, resp.body)
	}
	awaitStream(t, doneF, f.id)
	if got := f.engine.stats(t).TotalRequests; got != fBefore {
		t.Errorf("an engine of the quiesced tier served %d requests after the quiesce", got-fBefore)
	}
	r.awaitActive(t, tr.key(), 0)
}

// isDrained reports whether resp is the drain endpoint's 200 for the
// scope.
func isDrained(resp rawResponse, key, id string) bool {
	var v adminapi.DrainView
	return resp.status == http.StatusOK && json.Unmarshal(resp.body, &v) == nil &&
		v.Tier == key && v.Member == id && v.Drained
}

// awaitDrain waits for a drain call's answer.
func awaitDrain(t *testing.T, drained chan rawResponse) rawResponse {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case resp := <-drained:
		return resp
	case <-timer.C:
		t.Fatalf("the drain call did not answer within %v", waitTimeout)
		return rawResponse{}
	}
}

// requestLogLine is one line of enginesim's --request-log.
type requestLogLine struct {
	ID   string `json:"id"`
	Live int    `json:"live"`
}

// readRequestLog reads an engine's request log.
func readRequestLog(t *testing.T, path string) []requestLogLine {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // the test's own temporary file.
	if err != nil {
		t.Fatal(err)
	}
	var lines []requestLogLine
	for l := range strings.Lines(string(raw)) {
		var v requestLogLine
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%s: %v in %q", path, err, l)
		}
		lines = append(lines, v)
	}
	return lines
}

// checkUpstreamError sends one request to the tier whose engine answers
// every request with a 500: the client gets the engine's status and body
// byte for byte (the same body an in-process enginesim with the same
// option writes), and the engine saw exactly that one request.
func checkUpstreamError(t *testing.T, r *router, tr tier, logPath string) {
	cfg := enginesim.DefaultConfig()
	cfg.Model = servedModel
	cfg.ErrorRate = 1
	sim, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := httptest.NewRecorder()
	sim.ServeHTTP(want, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(servedModel, 4, false))))

	const id = "wl-upstream-error-1"
	resp, err := openChat(context.Background(), r, chatBody(tr.alias, 4, false), http.Header{"X-Request-Id": {id}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want.Code || string(body) != want.Body.String() || resp.Header.Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Fatalf("relayed error: %d %q (%s), want the engine's %d %q (%s)", resp.StatusCode, body, resp.Header.Get("Content-Type"),
			want.Code, want.Body.String(), want.Header().Get("Content-Type"))
	}
	r.awaitActive(t, tr.key(), 0)
	x := tr.members[0].engine
	if s := x.stats(t); s.TotalRequests != 1 {
		t.Errorf("the failing engine saw %d requests, want 1", s.TotalRequests)
	}
	if lines := readRequestLog(t, logPath); len(lines) != 1 || lines[0].ID != id {
		t.Errorf("the failing engine's request log: %+v, want one line with id %s", lines, id)
	}
}

// decisionRecord is the part of a decision record the test reads.
type decisionRecord struct {
	RequestID string `json:"request_id"`
	Tier      string `json:"tier"`
	Outcome   string `json:"outcome"`
	Status    int    `json:"status"`
	Refusal   string `json:"refusal_reason"`
	Attempts  []struct {
		MemberID string `json:"member_id"`
	} `json:"attempts"`
}

// engineOfRecord maps a tier's member to the engine's name in the test.
func engineOfRecord(rec decisionRecord) string {
	if len(rec.Attempts) != 1 {
		return ""
	}
	return rec.Attempts[0].MemberID // member ids are unique across the test's tiers' engines
}

// checkEvidence waits until the decision log holds one admitted record per
// request each engine counted, then checks the records against the
// engines' request logs request id for request id, and the engines' peak
// concurrency in those logs against the ceilings.
func checkEvidence(t *testing.T, decisions, logs string, engines map[string]*engine) {
	perEngine := map[string][]string{}
	refusals := map[string]int{}
	read := func() (bool, string) {
		raw, err := os.ReadFile(decisions) //nolint:gosec // the test's own temporary file.
		if err != nil {
			return false, err.Error()
		}
		clear(perEngine)
		clear(refusals)
		for l := range strings.Lines(string(raw)) {
			var rec decisionRecord
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("decision log: %v in %q", err, l)
			}
			switch rec.Outcome {
			case "admitted":
				name := engineOfRecord(rec)
				if name == "" {
					t.Fatalf("admitted record without its one attempt: %s", l)
				}
				perEngine[name] = append(perEngine[name], rec.RequestID)
			default:
				if len(rec.Attempts) != 0 {
					t.Fatalf("%s record with an attempt: %s", rec.Outcome, l)
				}
				refusals[rec.Refusal]++
			}
		}
		for name, e := range engines {
			s := e.stats(t)
			if uint64(len(perEngine[name])) != s.TotalRequests {
				return false, fmt.Sprintf("engine %s served %d requests, %d admitted records", name, s.TotalRequests, len(perEngine[name]))
			}
		}
		return true, ""
	}
	eventually(t, "decision log matches the engines' counts", read)
	ceilings := map[string]int{"a": 2, "b": 4, "c": 6, "f": 3, "g": 3, "d": 4, "e": 4, "x": 2}
	total := 0
	for name := range engines {
		lines := readRequestLog(t, filepath.Join(logs, engines[name].Name()+".jsonl"))
		var ids []string
		peak := 0
		for _, l := range lines {
			ids = append(ids, l.ID)
			peak = max(peak, l.Live)
		}
		recs := slices.Clone(perEngine[name])
		slices.Sort(ids)
		slices.Sort(recs)
		if !slices.Equal(ids, recs) {
			t.Errorf("engine %s: request log ids %v, admitted records %v", name, ids, recs)
		}
		if peak > ceilings[name] {
			t.Errorf("engine %s: %d requests live at once in its request log, ceiling %d", name, peak, ceilings[name])
		}
		total += len(ids)
	}
	t.Logf("evidence: %d admitted records matched the engines' request logs; refusals %v", total, refusals)
	if refusals["capacity_exhausted"] == 0 || refusals["tier_quiesced"] != 1 {
		t.Errorf("refusal records %v: want capacity_exhausted ones and exactly one tier_quiesced", refusals)
	}
}
