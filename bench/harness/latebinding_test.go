//go:build linux

package main

import (
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		body, want string
	}{
		{`{"error":{"message":"full","type":"server_error","code":"queue_full"}}`, "queue_full"},
		{`{"error":{"code":"queue_timeout"}}`, "queue_timeout"},
		{`{"error":{"message":"x","code":null}}`, noCode},
		{`{"error":{"code":429}}`, noCode},
		{`{"error":{"code":""}}`, noCode},
		{`not json`, noCode},
		{``, noCode},
	} {
		if got := errorCode([]byte(tc.body)); got != tc.want {
			t.Errorf("errorCode(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// scriptedTransport answers each request with the next of its responses,
// advancing the fake clock by the response's delay first.
type scriptedTransport struct {
	now   *time.Time
	steps []scriptedStep
}

// scriptedStep is one scripted answer.
type scriptedStep struct {
	delay  time.Duration
	status int
	body   string
	// id is the response's X-Request-Id; empty sends none.
	id  string
	err error
}

func (s *scriptedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	st := s.steps[0]
	s.steps = s.steps[1:]
	*s.now = s.now.Add(st.delay)
	if st.err != nil {
		return nil, st.err
	}
	h := http.Header{}
	if st.id != "" {
		h.Set("X-Request-Id", st.id)
	}
	return &http.Response{StatusCode: st.status, Header: h, Body: io.NopCloser(strings.NewReader(st.body))}, nil
}

func TestProbe(t *testing.T) {
	now := time.Unix(1000, 0)
	errDial := errors.New("dial refused")
	queueFull := `{"error":{"code":"queue_full"}}`
	tr := &scriptedTransport{now: &now, steps: []scriptedStep{
		{delay: 10 * time.Millisecond, status: http.StatusOK, body: "data: x", id: "req-1"},
		{delay: 30 * time.Millisecond, status: http.StatusOK, body: "data: y"},
		{delay: time.Millisecond, status: http.StatusTooManyRequests, body: queueFull, id: "req-3"},
		{delay: time.Millisecond, status: http.StatusTooManyRequests, body: queueFull, id: strings.Repeat("r", maxSeenIDBytes+1)},
		{delay: 5 * time.Second, status: http.StatusServiceUnavailable, body: `{"error":{"code":"queue_timeout"}}`, id: "req-5"},
		{delay: time.Millisecond, status: http.StatusBadGateway, body: "<html>", id: "req-6"},
		{delay: time.Millisecond, err: errDial},
	}}
	p := newProbe(tr, func() time.Time { return now })
	var bodies []string
	for range 7 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:1/v1/chat/completions", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.RoundTrip(req)
		if err != nil {
			if !errors.Is(err, errDial) {
				t.Fatalf("transport error = %v, want it handed on", err)
			}
			continue
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		bodies = append(bodies, string(b))
	}
	// Every body reaches the caller unchanged, refusals included.
	want := []string{"data: x", "data: y", queueFull, queueFull, `{"error":{"code":"queue_timeout"}}`, "<html>"}
	if strings.Join(bodies, "|") != strings.Join(want, "|") {
		t.Fatalf("bodies = %q, want %q", bodies, want)
	}
	headers, refusals := p.snapshot()
	if headers.Count != 2 || headers.Min != 10*time.Millisecond || headers.Max != 30*time.Millisecond {
		t.Fatalf("headers = %+v, want the two 2xx responses' 10 and 30 ms", headers)
	}
	wantRefusals := map[string]int{"429 queue_full": 2, "503 queue_timeout": 1, "502 " + noCode: 1}
	if len(refusals) != len(wantRefusals) {
		t.Fatalf("refusals = %v, want %v", refusals, wantRefusals)
	}
	for k, v := range wantRefusals {
		if refusals[k] != v {
			t.Fatalf("refusals = %v, want %v", refusals, wantRefusals)
		}
	}
	// The snapshot is a copy.
	refusals["429 queue_full"] = 99
	if _, again := p.snapshot(); again["429 queue_full"] != 2 {
		t.Fatalf("snapshot shares its map: %v", again)
	}
	// Every response's request id is kept with its status; one without
	// an id and one with an id longer than the router's are counted.
	seen, unidentified := p.responses()
	wantSeen := []seenResponse{{"req-1", 200}, {"req-3", 429}, {"req-5", 503}, {"req-6", 502}}
	if !slices.Equal(seen, wantSeen) || unidentified != 2 {
		t.Fatalf("responses = %v, %d unidentified; want %v, 2", seen, unidentified, wantSeen)
	}
	seen[0].ID = "changed"
	if again, _ := p.responses(); again[0].ID != "req-1" {
		t.Fatalf("responses shares its slice: %v", again)
	}
}

// loadResult returns a loadgen result of n successes with the given e2e
// and TTFT samples, and the given refusals by status.
func loadResult(e2e, ttft []time.Duration, statuses map[int]int) *loadgen.Result {
	r := &loadgen.Result{Statuses: map[int]int{}, Errors: map[loadgen.ErrorKind]int{}}
	for _, v := range e2e {
		r.E2E.Add(v)
		r.Sent++
		r.Succeeded++
		r.Statuses[http.StatusOK]++
	}
	for _, v := range ttft {
		r.TTFT.Add(v)
	}
	for s, n := range statuses {
		r.Sent += n
		r.Statuses[s] += n
		r.Errors[loadgen.ErrorStatus] += n
	}
	return r
}

func TestCombine(t *testing.T) {
	ms := time.Millisecond
	a := loadResult([]time.Duration{100 * ms, 300 * ms}, []time.Duration{10 * ms, 30 * ms}, map[int]int{429: 1})
	b := loadResult([]time.Duration{200 * ms}, []time.Duration{20 * ms}, map[int]int{503: 2})
	b.Dropped = 3
	c := combine(a, b)
	if c.Sent != 6 || c.Succeeded != 3 || c.Dropped != 3 {
		t.Fatalf("counts = %d sent, %d succeeded, %d dropped", c.Sent, c.Succeeded, c.Dropped)
	}
	if c.Statuses[200] != 3 || c.Statuses[429] != 1 || c.Statuses[503] != 2 || c.Errors[loadgen.ErrorStatus] != 3 {
		t.Fatalf("statuses %v, errors %v", c.Statuses, c.Errors)
	}
	if c.E2E.Count() != 3 || c.E2E.Quantile(0.5) != 200*ms || c.E2E.Max() != 300*ms || c.TTFT.Count() != 3 || c.TTFT.Min() != 10*ms {
		t.Fatalf("samples: e2e %+v, ttft %+v", c.E2E.Summary(), c.TTFT.Summary())
	}
}

func TestCheckRefusalsOnly(t *testing.T) {
	ms := time.Millisecond
	ok := func() *loadgen.Result {
		return loadResult([]time.Duration{ms, 2 * ms}, []time.Duration{ms, ms}, map[int]int{429: 1, 503: 1})
	}
	okRefusals := map[string]int{"429 queue_full": 1, "503 queue_timeout": 1}
	for _, tc := range []struct {
		name     string
		mutate   func(r *loadgen.Result)
		refusals map[string]int
		wantErr  string
	}{
		{name: "refusals only", mutate: func(*loadgen.Result) {}, refusals: okRefusals},
		{name: "nothing sent", mutate: func(r *loadgen.Result) { *r = loadgen.Result{} }, refusals: nil, wantErr: "no request was sent"},
		{name: "dropped arrival", mutate: func(r *loadgen.Result) { r.Dropped = 1 }, refusals: okRefusals, wantErr: "dropped"},
		{name: "transport error", mutate: func(r *loadgen.Result) { r.Sent++; r.Errors[loadgen.ErrorTransport]++ },
			refusals: okRefusals, wantErr: "failed other than"},
		{name: "502 from the router", mutate: func(r *loadgen.Result) { r.Sent++; r.Statuses[502]++; r.Errors[loadgen.ErrorStatus]++ },
			refusals: map[string]int{"429 queue_full": 1, "503 queue_timeout": 1, "502 upstream_unavailable": 1}, wantErr: "failed other than"},
		{name: "broken stream after 200", mutate: func(r *loadgen.Result) { r.Sent++; r.Statuses[200]++; r.Errors[loadgen.ErrorStream]++ },
			refusals: okRefusals, wantErr: "failed other than"},
		{name: "probe missed a refusal", mutate: func(*loadgen.Result) {}, refusals: map[string]int{"429 queue_full": 1}, wantErr: "refusals read by the client"},
		{name: "missing latency sample", mutate: func(r *loadgen.Result) { r.TTFT = loadgen.Distribution{} }, refusals: okRefusals, wantErr: "latency samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.mutate(r)
			err := checkRefusalsOnly("x", combine(r), tc.refusals)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// lateRunWith returns a run with the given e2e p99 in milliseconds and
// refusals.
func lateRunWith(p99ms int, refusals map[string]int, engineMax ...int) lateRun {
	return lateRun{
		Sent: 100, Succeeded: 100 - countOf(refusals), Refusals: refusals, EngineMaxInFlight: engineMax,
		E2E:  loadgen.Summary{P50: 900 * time.Millisecond, P99: time.Duration(p99ms) * time.Millisecond},
		TTFT: loadgen.Summary{P50: 400 * time.Millisecond, P99: time.Duration(p99ms-500) * time.Millisecond},
	}
}

func TestSummarizeLate(t *testing.T) {
	systems := []*lateSystem{
		{Name: "(a)", Runs: []lateRun{lateRunWith(3000, nil, 8, 8, 8), lateRunWith(2000, map[string]int{"503 queue_timeout": 2}, 8, 8, 8), lateRunWith(3600, nil, 8, 7, 8)}},
		{Name: "(b)", Runs: []lateRun{lateRunWith(6000, nil, 12, 19, 30), lateRunWith(5000, nil, 1, 2, 3), lateRunWith(4000, nil, 4, 4, 4)}},
		{Name: "(c)", Runs: []lateRun{lateRunWith(10000, nil), lateRunWith(8000, nil), lateRunWith(9000, nil)}},
	}
	sum, err := summarizeLate(systems)
	if err != nil {
		t.Fatal(err)
	}
	// Same-round ratios to (b): 0.5, 0.4, 0.9; to (c): 0.3, 0.25, 0.4.
	if math.Abs(sum.QueueVsEngineQueueP99-0.5) > 1e-12 || math.Abs(sum.QueueVsRoundRobinP99-0.3) > 1e-12 {
		t.Fatalf("ratios = %v, %v", sum.QueueVsEngineQueueP99, sum.QueueVsRoundRobinP99)
	}
	if sum.QueueRefused != 2 || sum.Rows[0].Refusals["503 queue_timeout"] != 2 {
		t.Fatalf("refusals = %d, row %v", sum.QueueRefused, sum.Rows[0].Refusals)
	}
	if a := sum.Rows[0]; a.E2EP99 != 3000 || a.TTFTP99 != 2500 || a.MaxEngineInFlight != 8 || a.Requests != 100 {
		t.Fatalf("(a) row = %+v", a)
	}
	if b := sum.Rows[1]; b.MaxEngineInFlight != 30 || b.E2EP99 != 5000 {
		t.Fatalf("(b) row = %+v", b)
	}

	missing := []*lateSystem{systems[0], {Name: "(b)", Runs: systems[1].Runs[:2]}, systems[2]}
	if _, err := summarizeLate(missing); !errors.Is(err, errLengthMismatch) {
		t.Fatalf("a missing round gave %v, want errLengthMismatch", err)
	}
	if _, err := summarizeLate(systems[:2]); !errors.Is(err, errNoSamples) {
		t.Fatalf("two systems gave %v, want errNoSamples", err)
	}
	empty := []*lateSystem{systems[0], {Name: "(b)"}, systems[2]}
	if _, err := summarizeLate(empty); !errors.Is(err, errNoSamples) {
		t.Fatalf("no runs gave %v, want errNoSamples", err)
	}
}

// tenantFixture is a heavy tenant that waited and a light one that
// waited little, by the router's records and at the client.
func tenantFixture() *tenantResult {
	return &tenantResult{
		RunSeconds: 15, Engines: "3 enginesim", Queue: "queue",
		Heavy: tenantRow{Tenant: tenantHeavy, Rate: 40, Sent: 600, Succeeded: 580,
			Queue: queueWait{Wait: loadgen.Summary{Count: 580, P50: 280 * time.Millisecond, P99: 780 * time.Millisecond},
				Waited: 560, QueueFull: 20, Records: 600},
			Headers:  loadgen.Summary{Count: 580, P50: 300 * time.Millisecond, P99: 800 * time.Millisecond},
			Refusals: map[string]int{"429 queue_full": 20}},
		Light: tenantRow{Tenant: tenantLight, Rate: 4, Sent: 60, Succeeded: 60,
			Queue:    queueWait{Wait: loadgen.Summary{Count: 60, P50: 0, P99: 78 * time.Millisecond}, Waited: 12, Records: 60},
			Headers:  loadgen.Summary{Count: 60, P50: 5 * time.Millisecond, P99: 200 * time.Millisecond},
			Refusals: map[string]int{}},
	}
}

func TestSummarizeTenants(t *testing.T) {
	r := tenantFixture()
	if err := summarizeTenants(r); err != nil {
		t.Fatal(err)
	}
	// The target's ratio is the router's time queued (78/780), not the
	// client's time to headers (200/800).
	if math.Abs(r.LightVsHeavyWaitP99-0.1) > 1e-12 || r.LightVsHeavyHeadersP99 != 0.25 || r.LightQueueFull != 0 {
		t.Fatalf("ratio %v, headers ratio %v, light queue_full %d", r.LightVsHeavyWaitP99, r.LightVsHeavyHeadersP99, r.LightQueueFull)
	}
	r.Light.Queue.QueueFull = 3
	if err := summarizeTenants(r); err != nil || r.LightQueueFull != 3 {
		t.Fatalf("light queue_full = %d (%v), want 3 from the records", r.LightQueueFull, err)
	}
	// A light tenant that never waited at its p99 has ratio 0.
	r = tenantFixture()
	r.Light.Queue.Wait.P99 = 0
	if err := summarizeTenants(r); err != nil || r.LightVsHeavyWaitP99 != 0 {
		t.Fatalf("light p99 0 gave ratio %v (%v), want 0", r.LightVsHeavyWaitP99, err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(r *tenantResult)
		want   error
	}{
		{"no heavy queue samples", func(r *tenantResult) { r.Heavy.Queue.Wait = loadgen.Summary{} }, errNoSamples},
		{"no light header samples", func(r *tenantResult) { r.Light.Headers = loadgen.Summary{} }, errNoSamples},
		{"heavy never waited", func(r *tenantResult) { r.Heavy.Queue.Wait.P99 = 0 }, errZeroDenominator},
		{"heavy headers p99 zero", func(r *tenantResult) { r.Heavy.Headers.P99 = 0 }, errZeroDenominator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tenantFixture()
			tc.mutate(r)
			if err := summarizeTenants(r); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRefusalsText(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]int
		want string
	}{
		{nil, "0"},
		{map[string]int{"429 queue_full": 0}, "0"},
		{map[string]int{"503 queue_timeout": 1, "429 queue_full": 12}, "12 × 429 queue_full, 1 × 503 queue_timeout"},
	} {
		if got := refusalsText(tc.in); got != tc.want {
			t.Errorf("refusalsText(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLateAndTenantsReport(t *testing.T) {
	late := &lateResult{Rounds: 1, BurstSeconds: 5, BurstRate: 45, LullSeconds: 12, LullRate: 8, Engines: "3 enginesim", Queue: "queue {}",
		Summary: lateSummary{
			Rows: []lateRow{
				{Name: "(a) q", openLoopMedians: openLoopMedians{E2EP99: 3000, Requests: 320}, Refusals: map[string]int{}, MaxEngineInFlight: 8},
				{Name: "(b) e", openLoopMedians: openLoopMedians{E2EP99: 4000}, Refusals: map[string]int{}, MaxEngineInFlight: 30},
				{Name: "(c) r", openLoopMedians: openLoopMedians{E2EP99: 9000}, Refusals: map[string]int{}},
			},
			QueueVsEngineQueueP99: 0.75, QueueVsRoundRobinP99: 0.33, QueueRefused: 0,
		}}
	tenants := tenantFixture()
	if err := summarizeTenants(tenants); err != nil {
		t.Fatal(err)
	}
	r := &results{Meta: meta{Date: "2026-01-01T00:00:00Z"}, Late: late, Tenants: tenants}
	r.Verdicts = r.verdicts()
	met := map[string]bool{}
	for _, v := range r.Verdicts {
		met[v.Target] = v.Met
	}
	want := map[string]bool{
		"late binding: Capacity + queue e2e p99 ≤ 0.7× Capacity with engine-side queueing, same offered load": false,
		"late binding: Capacity + queue refuses 0 requests while the queue bound holds":                       true,
		"two tenants (10× rate): light tenant's p99 wait ≤ 0.25× the heavy tenant's":                          true,
		"two tenants: the light tenant gets 0 queue_full":                                                     true,
	}
	if len(met) != len(want) {
		t.Fatalf("verdicts = %v, want %v", met, want)
	}
	for target, w := range want {
		if got, ok := met[target]; !ok || got != w {
			t.Errorf("verdict %q = %v (present %v), want %v", target, got, ok, w)
		}
	}
	md := summaryMarkdown(r)
	for _, s := range []string{
		"## Late binding", "| (a) q | 0 ms | 0 ms | 0 ms | 3000 ms | 0 | 0.0 % | 8 | 320 |", "(a) e2e p99 / (b): 0.75×; (a) / (c): 0.33×",
		"## Two tenants", "| heavy | 40.0 req/s | 600 | 580 | 280 ms | 780 ms | 560 of 580 | 20 | 300 ms | 800 ms | 0 ms | 20 × 429 queue_full |",
		"| light | 4.0 req/s | 60 | 60 | 0 ms | 78 ms | 12 of 60 | 0 | 5 ms | 200 ms | 0 ms | 0 |",
		"Light tenant's p99 time queued / heavy tenant's: 0.10× (client's time to headers: 0.25×); light tenant's queue_full: 0.",
		"| 0.75× | **not met** |", "| 0.10× (router's time queued: 78 ms vs 780 ms; client's time to headers: 0.25×) | met |", "| 0 (heavy tenant: 20) | met |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
}

func TestKeepResults(t *testing.T) {
	prev := &results{
		Meta: meta{Date: "D2", Commit: "c2",
			CPU:     []cpuUsage{{Scenario: "hidden load", WallSeconds: 80}, {Scenario: "proxy overhead", WallSeconds: 100}, {Scenario: "late binding", WallSeconds: 50}},
			LoadAvg: []loadSample{{At: "before hidden load", LoadAvg: "1 1 1"}, {At: "before late binding", LoadAvg: "2 2 2"}, {At: "end", LoadAvg: "3 3 3"}},
			Kept:    []keptRun{{Date: "D1", Commit: "c1", Scenarios: []string{"overhead"}}}},
		Overhead: &overheadResult{Rounds: 5},
		Hidden:   &hiddenResult{Rounds: 3},
		Late:     &lateResult{Rounds: 9},
	}
	cur := &results{Meta: meta{Date: "D3", Commit: "c3", CPU: []cpuUsage{{Scenario: "late binding", WallSeconds: 60}}}, Late: &lateResult{Rounds: 1}}
	keepResults(cur, prev, map[string]bool{"latebinding": true, "tenants": true})

	if cur.Late.Rounds != 1 {
		t.Fatalf("the scenario that ran was replaced: %+v", cur.Late)
	}
	if cur.Overhead != prev.Overhead || cur.Hidden != prev.Hidden || cur.Core != nil || cur.Tenants != nil || cur.Streams != nil {
		t.Fatalf("kept: overhead %v, hidden %v, core %v, tenants %v, streams %v", cur.Overhead, cur.Hidden, cur.Core, cur.Tenants, cur.Streams)
	}
	// Overhead came to prev from run D1; hidden was prev's own.
	want := []keptRun{{Date: "D1", Commit: "c1", Scenarios: []string{"overhead"}}, {Date: "D2", Commit: "c2", Scenarios: []string{"hidden"}}}
	if len(cur.Meta.Kept) != len(want) {
		t.Fatalf("kept = %+v, want %+v", cur.Meta.Kept, want)
	}
	for i, k := range want {
		got := cur.Meta.Kept[i]
		if got.Date != k.Date || got.Commit != k.Commit || strings.Join(got.Scenarios, ",") != strings.Join(k.Scenarios, ",") {
			t.Fatalf("kept = %+v, want %+v", cur.Meta.Kept, want)
		}
	}
	var cpu []string
	for _, u := range cur.Meta.CPU {
		cpu = append(cpu, u.Scenario)
	}
	if strings.Join(cpu, ",") != "late binding,proxy overhead,hidden load" {
		t.Fatalf("CPU records = %v: the run's own, then the kept scenarios'", cpu)
	}
	if len(cur.Meta.LoadAvg) != 1 || cur.Meta.LoadAvg[0].At != "before hidden load" {
		t.Fatalf("load averages = %+v", cur.Meta.LoadAvg)
	}
	md := summaryMarkdown(cur)
	for _, s := range []string{"Kept from the run of D1, commit c1 (`-keep`; not measured in this run): overhead.", "Kept from the run of D2, commit c2"} {
		if !strings.Contains(md, s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
}

func TestParseOptionsLateAndTenants(t *testing.T) {
	o, err := parseOptions([]string{"-scenarios", "latebinding,tenants", "-late-burst-rate", "60", "-keep"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.scenarios["latebinding"] || !o.scenarios["tenants"] || o.scenarios["hidden"] || o.lateBurstRate != 60 || !o.keep {
		t.Fatalf("options = %+v", o)
	}
	for _, args := range [][]string{
		{"-late-rounds", "0"}, {"-late-burst", "500ms"}, {"-late-lull", "0s"}, {"-tenant-run", "10ms"},
		{"-late-burst-rate", "0"}, {"-late-lull-rate", "1001"}, {"-tenant-rate", "-1"}, {"-tenant-rate", "NaN"},
	} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) accepted it", args)
		}
	}
}
