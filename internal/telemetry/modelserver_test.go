package telemetry

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// protocolTable is the checked-in copy of the model server protocol's
// metrics table (see the file's first lines for where it comes from).
const protocolTable = "testdata/gie-v1.5.0-model-server-protocol.md"

// protocolModule is the pinned module the table is copied from.
const protocolModule = "sigs.k8s.io/gateway-api-inference-extension@v1.5.0"

// tableLines returns the lines of the first Markdown table in path.
func tableLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // A test fixture or the module cache's copy.
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "|"):
			lines = append(lines, line)
		case len(lines) > 0:
			return lines
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// protocolRow is one required metric of the table: its type and vLLM name.
type protocolRow struct{ typ, vllm string }

// protocolRows reads the required metrics' type and vLLM column.
func protocolRows(t *testing.T, lines []string) map[string]protocolRow {
	t.Helper()
	cells := func(line string) []string {
		parts := strings.Split(strings.Trim(line, "|"), "|")
		for i := range parts {
			parts[i] = strings.Trim(strings.TrimSpace(parts[i]), "`")
		}
		return parts
	}
	header := cells(lines[0])
	metric, typ, vllm := slices.Index(header, "Metric"), slices.Index(header, "Type"), slices.Index(header, "vLLM metric")
	if metric < 0 || typ < 0 || vllm < 0 {
		t.Fatalf("table header %q lacks Metric, Type or vLLM metric", lines[0])
	}
	rows := map[string]protocolRow{}
	for _, line := range lines[2:] {
		c := cells(line)
		rows[c[metric]] = protocolRow{typ: c[typ], vllm: c[vllm]}
	}
	return rows
}

// scrapeAsPicker GETs the collector's exposition over HTTP without an
// Accept header and parses it as the inference extension's metrics data
// source does (expfmt's text parser, legacy name validation).
func scrapeAsPicker(t *testing.T, c *ModelServerCollector) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(Handler(NewRegistry(c)))
	defer srv.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// gaugeOf returns the value of the tier's series of name, and whether it
// is present.
func gaugeOf(t *testing.T, families map[string]*dto.MetricFamily, name, tier string) (float64, bool) {
	t.Helper()
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == LabelModelServerTier && l.GetValue() == tier {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestModelServerProtocolTable checks the model-server gauges against the
// inference extension's table (docs/OPERATIONS.md#model-server-gauges):
// the checked-in copy equals the pinned module's when the module cache
// holds it, and a picker's parse of a scrape finds each required metric
// under its vLLM name, typed as the table says, one series per serving
// tier labelled exactly model_name and tier.
func TestModelServerProtocolTable(t *testing.T) {
	lines := tableLines(t, protocolTable)
	t.Run("copy matches the pinned module", func(t *testing.T) {
		out, err := exec.CommandContext(context.Background(), "go", "env", "GOMODCACHE").Output()
		if err != nil {
			t.Skipf("go env GOMODCACHE: %v", err)
		}
		readme := filepath.Join(strings.TrimSpace(string(out)), protocolModule, "docs", "proposals", "003-model-server-protocol", "README.md")
		if _, err := os.Stat(readme); err != nil {
			t.Skipf("%s is not in the module cache", protocolModule)
		}
		if got := tableLines(t, readme); !slices.Equal(got, lines) {
			t.Fatalf("the module's table differs from %s:\n%s", protocolTable, strings.Join(got, "\n"))
		}
	})
	rows := protocolRows(t, lines)
	want := map[string]string{
		"TotalQueuedRequests":  NameModelServerWaiting,
		"TotalRunningRequests": NameModelServerRunning,
		"KVCacheUtilization":   NameModelServerKVUsage,
	}
	r := newMSPRig(t, v1alpha1.StrategyCapacity)
	r.sample(t, "gpu0", 2, 1, 0.5)
	r.sample(t, "gpu1", 0, 0, 0.25)
	families := scrapeAsPicker(t, r.collector(r.peek()))
	for metric, name := range want {
		row, ok := rows[metric]
		if !ok || row.vllm != name {
			t.Fatalf("%s: the table's vLLM metric is %q, the router serves %q", metric, row.vllm, name)
		}
		f, ok := families[name]
		if !ok {
			t.Fatalf("%s missing from the scrape", name)
		}
		if row.typ != "Gauge" || f.GetType() != dto.MetricType_GAUGE {
			t.Fatalf("%s: table type %q, served %v", name, row.typ, f.GetType())
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%s: %d series, want one per serving tier", name, len(f.GetMetric()))
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if !slices.Equal(labels, []string{"model_name=served/model", "tier=ns/llama"}) {
			t.Fatalf("%s labels %v", name, labels)
		}
	}
	for name, wantValue := range map[string]float64{NameModelServerWaiting: 1, NameModelServerRunning: 0, NameModelServerKVUsage: 0.25} {
		if v, _ := gaugeOf(t, families, name, "ns/llama"); v != wantValue {
			t.Fatalf("%s = %v, want %v", name, v, wantValue)
		}
	}
}

// urlResponse is what urlCollector answers for one target.
type urlResponse struct {
	sample scheduler.Telemetry
	err    error
	gate   chan struct{} // when set, Collect waits for it to close.
}

// urlCollector is a pressure.Collector answering per metrics URL.
type urlCollector struct {
	mu        sync.Mutex
	responses map[string]urlResponse
}

func (c *urlCollector) set(url string, r urlResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.responses[url] = r
}

func (c *urlCollector) Collect(ctx context.Context, target pressure.Target) (scheduler.Telemetry, error) {
	c.mu.Lock()
	r, ok := c.responses[target.MetricsURL]
	c.mu.Unlock()
	if !ok {
		return scheduler.Telemetry{}, errors.New("scripted: no response")
	}
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return scheduler.Telemetry{}, ctx.Err()
		}
	}
	return r.sample, r.err
}

// mspRig is a router serving "ns/llama" (members gpu0..gpu3, ceilings 4,
// vllm metrics) with a real pressure cache on a fake clock, whose
// collector is scripted and wrapped by a FetchMetrics.
type mspRig struct {
	clk     *clocktesting.FakePassiveClock
	fetches *FetchMetrics
	script  *urlCollector
	cache   *pressure.Cache
	sampled chan string
	rt      *router.Router
	admin   *adminserver.Admin
}

// newMSPRig builds the rig with the tier under strategy.
func newMSPRig(t *testing.T, strategy v1alpha1.Strategy) *mspRig {
	t.Helper()
	r := &mspRig{
		clk:     clocktesting.NewFakePassiveClock(t0),
		script:  &urlCollector{responses: map[string]urlResponse{}},
		sampled: make(chan string, 64),
	}
	r.fetches = NewFetchMetrics(r.clk)
	r.cache = pressure.New(pressure.Options{Clock: r.clk, Collector: r.fetches.Wrap(r.script), Sampled: func(id string) { r.sampled <- id }})
	t.Cleanup(r.cache.Close)
	r.rt = router.New(router.Options{Pressure: r.cache})
	t.Cleanup(r.rt.Close)
	snap := source.Snapshot{Tiers: []source.Tier{tier("ns/llama", strategy, 0,
		member{"gpu0", "http://127.0.0.1:8001", 4, "vllm"}, member{"gpu1", "http://127.0.0.1:8002", 4, "vllm"},
		member{"gpu2", "http://127.0.0.1:8003", 4, "vllm"}, member{"gpu3", "http://127.0.0.1:8004", 4, "vllm"})}}
	if err := r.cache.Reconfigure(tiers.PressureTiers(snap)); err != nil {
		t.Fatal(err)
	}
	r.rt.Tiers().Apply(snap)
	r.admin = adminserver.New(r.rt.Tiers(), adminserver.Options{})
	for i := range 4 {
		r.script.set(r.url(memberIDs[i]), urlResponse{err: errors.New("scripted: not set")})
	}
	return r
}

// memberIDs are the rig's members.
var memberIDs = []string{"gpu0", "gpu1", "gpu2", "gpu3"}

// url is the member's metrics URL.
func (r *mspRig) url(id string) string {
	return "http://127.0.0.1:" + strconv.Itoa(8001+slices.Index(memberIDs, id)) + "/metrics"
}

// sample makes the member's next fetches return the values, fetches them
// all and waits until every member's sample is published.
func (r *mspRig) sample(t *testing.T, id string, running, waiting, kv float64) {
	t.Helper()
	r.script.set(r.url(id), urlResponse{sample: scheduler.Telemetry{Running: &running, Waiting: &waiting, KVUsage: &kv}})
	r.refresh(t, memberIDs...)
}

// refresh makes the cache fetch the members (all must be due) and waits
// for their samples.
func (r *mspRig) refresh(t *testing.T, ids ...string) {
	t.Helper()
	r.clk.SetTime(r.clk.Now().Add(pressure.RefreshInterval))
	if _, err := r.cache.Snapshot("ns/llama"); err != nil {
		t.Fatal(err)
	}
	r.await(t, ids...)
}

// await waits until each member's refresh was published.
func (r *mspRig) await(t *testing.T, ids ...string) {
	t.Helper()
	left := slices.Clone(ids)
	for len(left) > 0 {
		select {
		case id := <-r.sampled:
			if i := slices.Index(left, id); i >= 0 {
				left = slices.Delete(left, i, i+1)
			}
		case <-time.After(failSafe):
			t.Fatalf("no sample of %v", left)
		}
	}
}

// peekReader reads the pressure cache without scheduling refreshes, so a
// scrape sees exactly the samples the test made.
type peekReader struct{ cache *pressure.Cache }

func (p peekReader) Snapshot(tier string) (map[string]scheduler.Pressure, error) {
	return p.cache.Peek(tier)
}

func (r *mspRig) peek() PressureReader { return peekReader{r.cache} }

// collector returns the model-server collector of the rig, reading
// pressure through reader.
func (r *mspRig) collector(reader PressureReader) *ModelServerCollector {
	return NewModelServerCollector(ModelServerOptions{Source: r.admin, Pressure: reader, Targets: r.rt.Tiers(), Fetches: r.fetches, Clock: r.clk})
}

// TestModelServerCountsOnlyFreshMemberValues fails if a gauge carries a
// member value the pressure cache does not read fresh: of four members,
// gpu0 is fresh, gpu1 stale (its last success 5.5 s old), gpu2 unknown
// (a NaN KV value) and gpu3 failed; only gpu0's waiting count and KV value
// count, though gpu1 and gpu2 have successful samples on record.
func TestModelServerCountsOnlyFreshMemberValues(t *testing.T) {
	r := newMSPRig(t, v1alpha1.StrategyCapacity)
	one, three, seven, five := 1.0, 3.0, 7.0, 5.0
	kv0, kv1, nan := 0.4, 0.1, math.NaN()
	gate := make(chan struct{})
	r.script.set(r.url("gpu0"), urlResponse{sample: scheduler.Telemetry{Running: &one, Waiting: &three, KVUsage: &kv0}, gate: gate})
	r.script.set(r.url("gpu1"), urlResponse{sample: scheduler.Telemetry{Running: &one, Waiting: &seven, KVUsage: &kv1}})
	r.script.set(r.url("gpu2"), urlResponse{sample: scheduler.Telemetry{Running: &one, Waiting: &five, KVUsage: &nan}})
	r.script.set(r.url("gpu3"), urlResponse{err: errors.New("scripted: connection refused")})
	start := r.clk.Now()
	if _, err := r.cache.Snapshot("ns/llama"); err != nil {
		t.Fatal(err)
	}
	// gpu0 holds one worker until 900 ms later; the other fetches the rest.
	r.await(t, "gpu1", "gpu2", "gpu3")
	r.clk.SetTime(start.Add(900 * time.Millisecond))
	close(gate)
	r.await(t, "gpu0")
	r.clk.SetTime(start.Add(5500 * time.Millisecond))

	view, _ := r.cache.Peek("ns/llama")
	for id, want := range map[string]scheduler.Freshness{
		"gpu0": scheduler.FreshnessFresh, "gpu1": scheduler.FreshnessStale, "gpu2": scheduler.FreshnessUnknown, "gpu3": scheduler.FreshnessFailed,
	} {
		if view[id].Freshness != want {
			t.Fatalf("%s reads %v, want %v", id, view[id].Freshness, want)
		}
	}
	targets := r.rt.Tiers().MetricsTargets("ns/llama")
	for _, id := range []string{"gpu1", "gpu2"} {
		if _, _, ok := r.fetches.lastSample(targets[id]); !ok {
			t.Fatalf("%s has no sample on record: the test would prove nothing", id)
		}
	}
	families := scrapeAsPicker(t, r.collector(r.peek()))
	if v, _ := gaugeOf(t, families, NameModelServerWaiting, "ns/llama"); v != 3 {
		t.Fatalf("waiting = %v, want gpu0's 3 alone", v)
	}
	if v, ok := gaugeOf(t, families, NameModelServerKVUsage, "ns/llama"); !ok || v != 0.4 {
		t.Fatalf("KV = %v (present %v), want gpu0's 0.4 alone", v, ok)
	}

	// Once gpu0 too is stale, no member value counts and KV is absent.
	r.clk.SetTime(start.Add(6 * time.Second))
	families = scrapeAsPicker(t, r.collector(r.peek()))
	if v, _ := gaugeOf(t, families, NameModelServerWaiting, "ns/llama"); v != 0 {
		t.Fatalf("waiting = %v with every member stale, want 0", v)
	}
	if v, ok := gaugeOf(t, families, NameModelServerKVUsage, "ns/llama"); ok {
		t.Fatalf("KV = %v with every member stale, want absent", v)
	}
	if _, ok := gaugeOf(t, families, NameModelServerRunning, "ns/llama"); !ok {
		t.Fatal("running is absent; it never depends on pressure")
	}
}

// TestModelServerScrapeRefreshesPressure checks a scrape reads the
// pressure cache as a request does: the members that are due are fetched,
// so a tier a picker stops choosing keeps fresh values.
func TestModelServerScrapeRefreshesPressure(t *testing.T) {
	r := newMSPRig(t, v1alpha1.StrategyCapacity)
	for _, id := range memberIDs {
		one := 1.0
		r.script.set(r.url(id), urlResponse{sample: scheduler.Telemetry{Running: &one, Waiting: &one}})
	}
	c := r.collector(r.cache)
	if _, err := NewRegistry(c).Gather(); err != nil {
		t.Fatal(err)
	}
	r.await(t, memberIDs...)
	families := scrapeAsPicker(t, c)
	if v, _ := gaugeOf(t, families, NameModelServerWaiting, "ns/llama"); v != 4 {
		t.Fatalf("waiting = %v after a scrape refreshed the members, want 4", v)
	}
}

// TestModelServerRemovedTierDropsSeries checks a tier removed from the
// configuration loses its series at the next scrape, and that a tier that
// does not rank by pressure reports waiting and running without KV.
func TestModelServerRemovedTierDropsSeries(t *testing.T) {
	rt := router.New(router.Options{})
	t.Cleanup(rt.Close)
	llama := tier("ns/llama", v1alpha1.StrategyRoundRobin, 0, member{"a", "http://127.0.0.1:8001", 2, ""}, member{"b", "http://127.0.0.1:8002", 2, ""})
	qwen := tier("ns/qwen", v1alpha1.StrategyRoundRobin, 0, member{"a", "http://127.0.0.1:8003", 2, ""}, member{"b", "http://127.0.0.1:8004", 2, ""})
	c := NewModelServerCollector(ModelServerOptions{Source: adminserver.New(rt.Tiers(), adminserver.Options{})})
	rt.Tiers().Apply(source.Snapshot{Tiers: []source.Tier{llama, qwen}})
	families := scrapeAsPicker(t, c)
	for _, key := range []string{"ns/llama", "ns/qwen"} {
		for _, name := range []string{NameModelServerWaiting, NameModelServerRunning} {
			if _, ok := gaugeOf(t, families, name, key); !ok {
				t.Fatalf("%s of %s missing", name, key)
			}
		}
		if _, ok := gaugeOf(t, families, NameModelServerKVUsage, key); ok {
			t.Fatalf("KV of %s present without any member value", key)
		}
	}
	rt.Tiers().Apply(source.Snapshot{Tiers: []source.Tier{qwen}})
	families = scrapeAsPicker(t, c)
	if _, ok := gaugeOf(t, families, NameModelServerRunning, "ns/llama"); ok {
		t.Fatal("the removed tier still has series")
	}
	if _, ok := gaugeOf(t, families, NameModelServerRunning, "ns/qwen"); !ok {
		t.Fatal("the remaining tier lost its series")
	}
}

// fixedView is a CapacitySource returning one view.
type fixedView adminapi.CapacityView

func (v fixedView) Capacity() adminapi.CapacityView { return adminapi.CapacityView(v) }

// freshReader reads every member fresh.
type freshReader struct{}

func (freshReader) Snapshot(string) (map[string]scheduler.Pressure, error) {
	out := map[string]scheduler.Pressure{}
	for _, id := range []string{"gpu0", "gpu1"} {
		out[id] = freshPressure
	}
	return out, nil
}

// fixedTargets maps the members gpu0 and gpu1 to their targets.
type fixedTargets struct{}

func (fixedTargets) MetricsTargets(string) map[string]pressure.Target {
	return map[string]pressure.Target{
		"gpu0": {MetricsURL: "http://127.0.0.1:8001/metrics", Engine: "vllm"},
		"gpu1": {MetricsURL: "http://127.0.0.1:8002/metrics", Engine: "vllm"},
	}
}

// TestModelServerSaturationAndNotServing pins what a picker reads of a
// tier in each admission state (docs/OPERATIONS.md#model-server-gauges):
// KV is the least fresh value among eligible members, a full member
// counting 1; a saturated tier reads KV 1 and waiting at least
// SaturatedWaiting; a tier that does not serve has no series.
func TestModelServerSaturationAndNotServing(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	fetches := NewFetchMetrics(clk)
	collect := fetches.Wrap(&urlCollector{responses: map[string]urlResponse{
		"http://127.0.0.1:8001/metrics": {sample: telemetryOf(2, 1, 0.6)},
		"http://127.0.0.1:8002/metrics": {sample: telemetryOf(0, 2, 0.3)},
	}})
	for _, target := range (fixedTargets{}).MetricsTargets("") {
		if _, err := collect.Collect(context.Background(), target); err != nil {
			t.Fatal(err)
		}
	}
	four, two, eight := 4, 2, 8
	base := adminapi.TierCapacity{Tier: "ns/llama", Strategy: "Capacity", ServedModel: "meta/llama", Active: 1, MaxConcurrency: &eight, State: "admitting",
		Members: []adminapi.MemberCapacity{
			{ID: "gpu0", Active: 1, MaxConcurrency: &four, State: "admitting", Ready: true},
			{ID: "gpu1", Active: 0, MaxConcurrency: &four, State: "admitting", Ready: true},
		}}
	for _, tt := range []struct {
		desc        string
		mutate      func(*adminapi.TierCapacity)
		absent      bool    // no series at all.
		waiting, kv float64 // kv < 0: absent.
	}{
		{desc: "serving", mutate: func(*adminapi.TierCapacity) {}, waiting: 3, kv: 0.3},
		{desc: "the emptiest member full", mutate: func(t *adminapi.TierCapacity) { t.Members[1].Active = 4 }, waiting: 3, kv: 0.6},
		{desc: "the emptiest member quiesced", mutate: func(t *adminapi.TierCapacity) { t.Members[1].State = "quiesced" }, waiting: 3, kv: 0.6},
		{desc: "the emptiest member not ready", mutate: func(t *adminapi.TierCapacity) { t.Members[1].Ready = false }, waiting: 3, kv: 0.6},
		{desc: "queue waiting, not full", mutate: func(t *adminapi.TierCapacity) { t.Queue = adminapi.TierQueue{MaxRequests: &four, Waiting: 1} },
			waiting: 4, kv: 0.3},
		{desc: "queue full", mutate: func(t *adminapi.TierCapacity) { t.Queue = adminapi.TierQueue{MaxRequests: &two, Waiting: 2} },
			waiting: SaturatedWaiting, kv: 1},
		{desc: "every eligible member full, no queue", mutate: func(t *adminapi.TierCapacity) {
			t.Members[0].Active, t.Members[1].Active = 4, 4
		}, waiting: SaturatedWaiting, kv: 1},
		{desc: "one full, the other quiesced", mutate: func(t *adminapi.TierCapacity) {
			t.Members[0].Active, t.Members[1].State = 4, "quiesced"
		}, waiting: SaturatedWaiting, kv: 1},
		{desc: "tier at its ceiling", mutate: func(t *adminapi.TierCapacity) { t.MaxConcurrency = &two; t.Active = 2 }, waiting: SaturatedWaiting, kv: 1},
		{desc: "a direct tier, full", mutate: func(t *adminapi.TierCapacity) {
			t.Strategy, t.Members = "Direct", t.Members[:1]
			t.Members[0].Active = 4
		}, waiting: SaturatedWaiting, kv: -1},
		{desc: "a round-robin tier", mutate: func(t *adminapi.TierCapacity) { t.Strategy = "RoundRobin" }, waiting: 0, kv: -1},
		{desc: "quiesced", mutate: func(t *adminapi.TierCapacity) { t.State = "quiesced" }, absent: true},
		{desc: "drained", mutate: func(t *adminapi.TierCapacity) { t.State, t.Active, t.Members[0].Active = "quiesced", 0, 0 }, absent: true},
		{desc: "removed, holding leases", mutate: func(t *adminapi.TierCapacity) { t.Removed = true }, absent: true},
		{desc: "no ready member", mutate: func(t *adminapi.TierCapacity) { t.Members[0].Ready, t.Members[1].Ready = false, false }, absent: true},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			tc := base
			tc.Members = slices.Clone(base.Members)
			tt.mutate(&tc)
			c := NewModelServerCollector(ModelServerOptions{Source: fixedView{Tiers: []adminapi.TierCapacity{tc}},
				Pressure: freshReader{}, Targets: fixedTargets{}, Fetches: fetches, Clock: clk})
			families := scrapeAsPicker(t, c)
			running, ok := gaugeOf(t, families, NameModelServerRunning, "ns/llama")
			if tt.absent {
				if ok || len(families) != 0 {
					t.Fatalf("series %v of a tier that does not serve", families)
				}
				return
			}
			if !ok || running != float64(tc.Active) {
				t.Fatalf("running = %v (present %v), want %d", running, ok, tc.Active)
			}
			if waiting, _ := gaugeOf(t, families, NameModelServerWaiting, "ns/llama"); waiting != tt.waiting {
				t.Fatalf("waiting = %v, want %v", waiting, tt.waiting)
			}
			kv, ok := gaugeOf(t, families, NameModelServerKVUsage, "ns/llama")
			if ok != (tt.kv >= 0) || ok && kv != tt.kv {
				t.Fatalf("KV = %v (present %v), want %v", kv, ok, tt.kv)
			}
		})
	}
}

// telemetryOf is one engine sample.
func telemetryOf(running, waiting, kv float64) scheduler.Telemetry {
	return scheduler.Telemetry{Running: &running, Waiting: &waiting, KVUsage: &kv}
}
