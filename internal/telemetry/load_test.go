package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// holdingMember is a fake engine: requests whose body contains "hold"
// wait until release is closed; every request is announced on arrived.
type holdingMember struct {
	srv     *httptest.Server
	release chan struct{}
	arrived chan string
	served  atomic.Int64
}

func newHoldingMember(t *testing.T, id string) *holdingMember {
	t.Helper()
	m := &holdingMember{release: make(chan struct{}), arrived: make(chan string, 1024)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.served.Add(1)
		m.arrived <- id
		if strings.Contains(string(body), "hold") {
			<-m.release
		}
		_, _ = io.WriteString(w, `{"member":"`+id+`"}`)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// loadRig is a real router over two holding members with a Capacity tier
// (ceilings 3 and 3, tier ceiling 5) and a RoundRobin tier, its admin
// handler, and a registry with the capacity and request collectors.
type loadRig struct {
	rt       *router.Router
	admin    *adminserver.Admin
	front    *httptest.Server
	client   *http.Client
	members  []*holdingMember
	registry *prometheus.Registry
	requests *RequestMetrics
	press    *tierstest.Pressure
}

func newLoadRig(t *testing.T) *loadRig {
	t.Helper()
	g := &loadRig{requests: NewRequestMetrics(), press: &tierstest.Pressure{}}
	g.members = []*holdingMember{newHoldingMember(t, "gpu0"), newHoldingMember(t, "gpu1")}
	ready := &fakeReadiness{}
	g.rt = router.New(router.Options{Readiness: ready, Pressure: g.press, Recorder: g.requests})
	t.Cleanup(g.rt.Close)
	snap := source.Snapshot{Tiers: []source.Tier{
		tier("ns/cap", v1alpha1.StrategyCapacity, 5,
			member{"gpu0", g.members[0].srv.URL, 3, "vllm"}, member{"gpu1", g.members[1].srv.URL, 3, "vllm"}),
		tier("ns/rr", v1alpha1.StrategyRoundRobin, 0,
			member{"gpu0", g.members[0].srv.URL, 2, ""}, member{"gpu1", g.members[1].srv.URL, 2, ""}),
	}}
	ready.register(snap)
	g.rt.Tiers().Apply(snap)
	g.press.Set("ns/cap", map[string]scheduler.Pressure{"gpu0": freshPressure, "gpu1": stalePressure})
	g.admin = adminserver.New(g.rt.Tiers(), adminserver.Options{})
	g.front = httptest.NewServer(g.rt)
	t.Cleanup(g.front.Close)
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(transport.CloseIdleConnections)
	g.client = &http.Client{Transport: transport}
	g.registry = NewRegistry(NewCapacityCollector(CapacityOptions{Source: g.admin}), g.requests)
	return g
}

// post sends one request and reads the whole response.
func (g *loadRig) post(t *testing.T, model, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, g.front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","note":"`+body+`"}`))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// gauges gathers the registry and returns every gauge value by
// "name{tier,member}" (member omitted for tier metrics).
func gauges(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Error(err) // may run on a scraping goroutine: no Fatal.
	}
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[seriesName(mf.GetName(), m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

// seriesName is name{label=value,...} in label order.
func seriesName(name string, m *dto.Metric) string {
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

// checkReconciles checks one scrape: every tier's active gauge is the sum
// of its members', and nothing exceeds its ceiling.
func checkReconciles(t *testing.T, v map[string]float64) {
	t.Helper()
	for _, tierKey := range []string{"ns/cap", "ns/rr"} {
		sum := 0.0
		for _, id := range []string{"gpu0", "gpu1"} {
			a := v[nameMemberActive+"{member="+id+",tier="+tierKey+"}"]
			if c, ok := v[nameMemberMax+"{member="+id+",tier="+tierKey+"}"]; ok && a > c {
				t.Errorf("%s/%s active %v above its ceiling %v", tierKey, id, a, c)
			}
			sum += a
		}
		active := v[nameTierActive+"{tier="+tierKey+"}"]
		if active != sum {
			t.Errorf("%s: tier active %v, members sum %v", tierKey, active, sum)
		}
		if c, ok := v[nameTierMax+"{tier="+tierKey+"}"]; ok && active > c {
			t.Errorf("%s: active %v above the tier ceiling %v", tierKey, active, c)
		}
	}
}

// checkAgrees checks a scrape against the capacity view served on
// GET /admin/v1/capacity at the same quiescent moment.
func checkAgrees(t *testing.T, g *loadRig) {
	t.Helper()
	w := httptest.NewRecorder()
	g.admin.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/admin/v1/capacity", nil))
	var view adminapi.CapacityView
	if err := json.Unmarshal(w.Body.Bytes(), &view); err != nil {
		t.Fatal(err)
	}
	v := gauges(t, g.registry)
	want := map[string]float64{}
	for _, tc := range view.Tiers {
		want[nameTierActive+"{tier="+tc.Tier+"}"] = float64(tc.Active)
		if tc.MaxConcurrency != nil {
			want[nameTierMax+"{tier="+tc.Tier+"}"] = float64(*tc.MaxConcurrency)
		}
		want[nameQueueWaiting+"{tier="+tc.Tier+"}"] = float64(tc.Queue.Waiting)
		want[nameQueueOldestWait+"{tier="+tc.Tier+"}"] = float64(tc.Queue.OldestWaitMillis) / 1000
		if tc.Queue.MaxRequests != nil {
			want[nameQueueMax+"{tier="+tc.Tier+"}"] = float64(*tc.Queue.MaxRequests)
		}
		for _, m := range tc.Members {
			key := "{member=" + m.ID + ",tier=" + tc.Tier + "}"
			want[nameMemberActive+key] = float64(m.Active)
			want[nameMemberReady+key] = boolValue(m.Ready)
			if m.MaxConcurrency != nil {
				want[nameMemberMax+key] = float64(*m.MaxConcurrency)
			}
			if p := m.Pressure; p != nil {
				for _, f := range freshnessClasses {
					want[nameMemberFreshness+"{freshness="+f.String()+",member="+m.ID+",tier="+tc.Tier+"}"] = boolValue(p.Freshness == f.String())
				}
				if p.PPM != nil {
					want[nameMemberPPM+key] = float64(*p.PPM)
				}
			}
		}
	}
	if fmt.Sprint(v) != fmt.Sprint(want) {
		t.Errorf("metrics and the capacity view disagree:\nmetrics %v\n   view %v", v, want)
	}
}

// TestMetricsAgreeWithCapacityView holds requests on both tiers, checks the
// scrape equals the capacity view exactly, then runs concurrent load while
// scraping concurrently: every scrape reconciles tier = Σ members within
// the ceilings, and after the load both surfaces agree again at zero.
func TestMetricsAgreeWithCapacityView(t *testing.T) {
	g := newLoadRig(t)
	var held sync.WaitGroup
	for i, model := range []string{"cap", "cap", "cap", "rr"} {
		held.Add(1)
		go func() {
			defer held.Done()
			if status := g.post(t, model, fmt.Sprintf("hold %d", i)); status != http.StatusOK {
				t.Errorf("held request: %d", status)
			}
		}()
	}
	for range 4 {
		select {
		case <-g.members[0].arrived:
		case <-g.members[1].arrived:
		}
	}
	checkAgrees(t, g)
	v := gauges(t, g.registry)
	if v[nameTierActive+"{tier=ns/cap}"] != 3 || v[nameTierActive+"{tier=ns/rr}"] != 1 {
		t.Fatalf("held counts %v", v)
	}

	// Concurrent load with concurrent scrapes.
	stop := make(chan struct{})
	var scrapers sync.WaitGroup
	var scrapes atomic.Int64
	for range 3 {
		scrapers.Add(1)
		go func() {
			defer scrapers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				checkReconciles(t, gauges(t, g.registry))
				scrapes.Add(1)
			}
		}()
	}
	var load sync.WaitGroup
	var refused atomic.Int64
	for w := range 6 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := range 25 {
				model := []string{"cap", "rr"}[(w+i)%2]
				switch status := g.post(t, model, "go"); status {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					refused.Add(1)
				default:
					t.Errorf("status %d", status)
				}
			}
		}()
	}
	load.Wait()
	for _, m := range g.members {
		close(m.release)
	}
	held.Wait()
	close(stop)
	scrapers.Wait()
	if scrapes.Load() == 0 {
		t.Fatal("no scrape ran during the load")
	}
	checkAgrees(t, g)
	v = gauges(t, g.registry)
	if v[nameTierActive+"{tier=ns/cap}"] != 0 || v[nameTierActive+"{tier=ns/rr}"] != 0 {
		t.Fatalf("counts after the load %v", v)
	}
	// The request counters saw every request exactly once.
	total := 0.0
	families, _ := g.registry.Gather()
	for _, mf := range families {
		if mf.GetName() == nameRequests {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total != 4+6*25 {
		t.Fatalf("sluice_requests_total sums to %v, want %d", total, 4+6*25)
	}
	if g.press.Snapshots.Load() == 0 {
		t.Fatal("the Capacity requests did not read pressure")
	}
}

// TestScrapeChangesNothing checks a scrape is read-only: scraping a real
// pressure cache whose refreshes are all due schedules no fetch; and a
// router scraped between and during requests makes exactly the member
// choices (admission cursor) and counts of one never scraped.
func TestScrapeChangesNothing(t *testing.T) {
	t.Run("pressure cache", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(t0)
		fetches := NewFetchMetrics(clk)
		collector := &fakeCollector{}
		cache := pressure.New(pressure.Options{Clock: clk, Collector: fetches.Wrap(collector)})
		t.Cleanup(cache.Close)
		rt := router.New(router.Options{Pressure: cache})
		t.Cleanup(rt.Close)
		snap := source.Snapshot{Tiers: []source.Tier{tier("ns/cap", v1alpha1.StrategyCapacity, 0,
			member{"gpu0", "http://127.0.0.1:8001", 2, "vllm"}, member{"gpu1", "http://127.0.0.1:8002", 2, "vllm"})}}
		if err := cache.Reconfigure(tiers.PressureTiers(snap)); err != nil {
			t.Fatal(err)
		}
		rt.Tiers().Apply(snap)
		before, _ := cache.Peek("ns/cap")
		reg := NewRegistry(NewCapacityCollector(CapacityOptions{Source: adminserver.New(rt.Tiers(), adminserver.Options{}),
			Targets: rt.Tiers(), Fetches: fetches, Clock: clk}), fetches)
		for range 50 {
			if _, err := reg.Gather(); err != nil {
				t.Fatal(err)
			}
		}
		after, _ := cache.Peek("ns/cap")
		if collector.calls.Load() != 0 || fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("scrapes caused %d fetches; pressure %v → %v", collector.calls.Load(), before, after)
		}
		// Control: the request path's Snapshot does schedule both fetches.
		collector.called = make(chan struct{}, 2)
		if _, err := cache.Snapshot("ns/cap"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case <-collector.called:
			case <-time.After(failSafe):
				t.Fatal("Snapshot scheduled no fetch")
			}
		}
	})
	t.Run("admission", func(t *testing.T) {
		sequence := func(scrape bool) []string {
			g := newLoadRig(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if scrape {
				wg.Add(1)
				go func() { // scrapes during the requests ...
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
							gauges(t, g.registry)
						}
					}
				}()
			}
			var got []string
			for i := range 12 {
				if scrape {
					gauges(t, g.registry) // ... and between them.
				}
				model := []string{"cap", "rr"}[i%2]
				if status := g.post(t, model, "go"); status != http.StatusOK {
					t.Fatalf("status %d", status)
				}
				select {
				case <-g.members[0].arrived:
					got = append(got, model+":gpu0")
				case <-g.members[1].arrived:
					got = append(got, model+":gpu1")
				}
			}
			close(stop)
			wg.Wait()
			checkAgrees(t, g)
			return got
		}
		plain, scraped := sequence(false), sequence(true)
		if fmt.Sprint(plain) != fmt.Sprint(scraped) {
			t.Fatalf("member choices changed under scraping:\n%v\n%v", plain, scraped)
		}
	})
}
