package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/sse"
)

// TestRequestMetrics feeds outcomes of every kind and checks the counters
// and histograms: one request count each, refusals only for admission
// refusals, schedule time only for requests that reached admission, first
// byte (from dispatch) only for admitted requests whose headers arrived.
func TestRequestMetrics(t *testing.T) {
	m := NewRequestMetrics()
	for _, o := range []router.Outcome{
		{Result: router.ResultRefused, Code: "model_not_found", Status: 404},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultNotAdmitted, Code: "capacity_exhausted", Status: 503, Schedule: 3 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultNotAdmitted, Code: "tier_quiesced", Status: 503, Schedule: 2 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 200, End: router.EndComplete,
			Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond, FirstByte: 100*time.Microsecond + 20*time.Millisecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 502, Code: "upstream_unavailable",
			End: router.EndUnavailable, Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 502, Code: "upstream_unavailable",
			End: router.EndUnavailable, Ejection: router.EjectRefused, Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 502, Code: "upstream_unavailable",
			End: router.EndUnavailable, ProtocolError: router.ProtocolHeadTooLarge, Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 200, End: router.EndTruncated,
			Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond},
		{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 200, End: router.EndMalformed,
			Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond},
	} {
		m.Record(o)
	}
	want := `
# HELP sluice_admission_refusals_total Requests the tier's admission owner refused, by reason (capacity_exhausted, tier_quiesced, no_eligible_member).
# TYPE sluice_admission_refusals_total counter
sluice_admission_refusals_total{reason="capacity_exhausted",tier="ns/cap"} 1
sluice_admission_refusals_total{reason="tier_quiesced",tier="ns/cap"} 1
# HELP sluice_requests_total Inference requests by tier, member and outcome (admitted, not_admitted, refused).
# TYPE sluice_requests_total counter
sluice_requests_total{member="",outcome="refused",tier=""} 1
sluice_requests_total{member="",outcome="not_admitted",tier="ns/cap"} 2
sluice_requests_total{member="gpu0",outcome="admitted",tier="ns/cap"} 6
# HELP sluice_member_ejections_total Members taken out of selection until a readiness probe passes, by reason (connection_refused, connection_reset, connection_closed).
# TYPE sluice_member_ejections_total counter
sluice_member_ejections_total{member="gpu0",reason="connection_refused",tier="ns/cap"} 1
# HELP sluice_member_protocol_errors_total Exchanges a member ended by breaking the HTTP protocol before its response headers (answered 502 upstream_unavailable), by reason (response_head_too_large, too_many_informational, switching_protocols).
# TYPE sluice_member_protocol_errors_total counter
sluice_member_protocol_errors_total{member="gpu0",reason="response_head_too_large",tier="ns/cap"} 1
# HELP sluice_stream_outcomes_total Admitted requests by how their one upstream exchange ended (complete, truncated, malformed, upstream_unavailable, header_timeout, idle_timeout, upstream_error, client_gone, aborted).
# TYPE sluice_stream_outcomes_total counter
sluice_stream_outcomes_total{member="gpu0",outcome="complete",tier="ns/cap"} 1
sluice_stream_outcomes_total{member="gpu0",outcome="upstream_unavailable",tier="ns/cap"} 3
sluice_stream_outcomes_total{member="gpu0",outcome="malformed",tier="ns/cap"} 1
sluice_stream_outcomes_total{member="gpu0",outcome="truncated",tier="ns/cap"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), nameRequests, nameRefusals, nameEjections, nameProtocolErrors, nameStreamOutcomes); err != nil {
		t.Fatal(err)
	}
	want = `
# HELP sluice_upstream_first_byte_seconds Time from the start of the upstream attempt to the member's response headers, in seconds.
# TYPE sluice_upstream_first_byte_seconds histogram
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.005"} 0
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.01"} 0
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.025"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.05"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.1"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.25"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="0.5"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="1"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="2.5"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="5"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="10"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="30"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="60"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="120"} 1
sluice_upstream_first_byte_seconds_bucket{member="gpu0",tier="ns/cap",le="+Inf"} 1
sluice_upstream_first_byte_seconds_sum{member="gpu0",tier="ns/cap"} 0.02
sluice_upstream_first_byte_seconds_count{member="gpu0",tier="ns/cap"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), nameFirstByte); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m, nameScheduleDuration); n != 1 {
		t.Fatalf("%d schedule series, want one for ns/cap", n)
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// BenchmarkRecord measures what the request metrics add to each request:
// a cached series lookup, a counter increment and two histogram
// observations.
func BenchmarkRecord(b *testing.B) {
	m := NewRequestMetrics()
	o := router.Outcome{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu0", Status: 200,
		End: router.EndComplete, Schedule: 5 * time.Microsecond, Dispatch: 100 * time.Microsecond, FirstByte: 20 * time.Millisecond}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Record(o)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Record(o)
			}
		})
	})
}

// seriesOf returns the label sets ("tier/member/value") of name's series
// in the collector's exposition.
func seriesOf(t *testing.T, m *RequestMetrics, name string) map[string]float64 {
	t.Helper()
	reg := NewRegistry(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			value := labels[labelOutcome] + labels[labelReason] + labels[labelKind]
			v := s.GetCounter().GetValue()
			if h := s.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			out[labels[labelTier]+"/"+labels[labelMember]+"/"+value] = v
		}
	}
	return out
}

// TestRequestMetricsConfigure proves every series whose labels the
// configuration determines exists at zero right after Configure, and that
// the series of a removed tier or member are gone after the next one, as
// are those a late request of a removed member created again.
func TestRequestMetricsConfigure(t *testing.T) {
	m := NewRequestMetrics()
	if got := seriesOf(t, m, nameRequests); len(got) != 1 || got["//refused"] != 0 {
		t.Fatalf("a fresh router's requests %v, want the gate refusals' series only", got)
	}
	both := source.Snapshot{Tiers: []source.Tier{
		tier("ns/cap", v1alpha1.StrategyCapacity, 0, member{"gpu0", "http://127.0.0.1:8001", 2, ""}, member{"gpu1", "http://127.0.0.1:8002", 2, ""}),
		tier("ns/rr", v1alpha1.StrategyRoundRobin, 0, member{"gpu2", "http://127.0.0.1:8003", 2, ""}),
	}}
	m.Configure(both)
	want := map[string]int{
		nameRequests:       1 + 2 + 3, // refused; not admitted per tier; admitted per member.
		nameRefusals:       2 * len(evidence.AdmissionCodes),
		nameStreamOutcomes: 3 * len(evidence.StreamOutcomes),
		nameEjections:      3 * len(evidence.Ejections),
		nameProtocolErrors: 3 * len(evidence.ProtocolErrors),
		nameTokens:         3 * 2, // prompt and completion per member.
	}
	for name, n := range want {
		got := seriesOf(t, m, name)
		if len(got) != n {
			t.Errorf("%s: %d series %v, want %d", name, len(got), got, n)
		}
		for labels, v := range got {
			if v != 0 {
				t.Errorf("%s%s = %v, want 0", name, labels, v)
			}
		}
	}
	if got := seriesOf(t, m, nameStreamOutcomes); len(got) > 0 {
		if _, ok := got["ns/rr/gpu2/truncated"]; !ok {
			t.Errorf("no zero series for gpu2's truncated streams: %v", got)
		}
	}

	// A request on gpu1, then gpu1 and ns/rr leave; gpu1 ends a late one.
	admitted := router.Outcome{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu1", Status: 200, End: router.EndComplete}
	m.Record(admitted)
	m.Record(router.Outcome{Tier: "ns/rr", Alias: "rr", Result: router.ResultAdmitted, Member: "gpu2", Status: 200,
		End: router.EndComplete, FirstToken: time.Second, Duration: 2 * time.Second})
	m.Intervals("ns/rr", "gpu2").Observe(0.02)
	if got := seriesOf(t, m, nameInterToken); got["ns/rr/gpu2/"] != 1 {
		t.Fatalf("inter-token latency %v, want gpu2's one observation", got)
	}
	m.Configure(source.Snapshot{Tiers: []source.Tier{
		tier("ns/cap", v1alpha1.StrategyCapacity, 0, member{"gpu0", "http://127.0.0.1:8001", 2, ""}),
	}})
	m.Record(admitted)
	for name, gone := range map[string][]string{
		nameRequests:        {"ns/rr//not_admitted", "ns/rr/gpu2/admitted"},
		nameStreamOutcomes:  {"ns/rr/gpu2/complete"},
		nameRefusals:        {"ns/rr//capacity_exhausted"},
		nameTokens:          {"ns/rr/gpu2/prompt", "ns/rr/gpu2/completion"},
		nameFirstToken:      {"ns/rr/gpu2/"},
		nameInterToken:      {"ns/rr/gpu2/"},
		nameRequestDuration: {"ns/rr/gpu2/complete"},
	} {
		got := seriesOf(t, m, name)
		for _, labels := range gone {
			if _, ok := got[labels]; ok {
				t.Errorf("%s%s still exported after removal", name, labels)
			}
		}
	}
	if got := seriesOf(t, m, nameRequests); got["ns/cap/gpu1/admitted"] != 1 || got["ns/cap/gpu0/admitted"] != 0 {
		t.Fatalf("requests %v, want gpu1's late request counted afresh and gpu0 at 0", got)
	}
	m.Configure(source.Snapshot{Tiers: []source.Tier{
		tier("ns/cap", v1alpha1.StrategyCapacity, 0, member{"gpu0", "http://127.0.0.1:8001", 2, ""}),
	}})
	if got := seriesOf(t, m, nameRequests); len(got) != 3 {
		t.Fatalf("requests %v, want refused, ns/cap not admitted and gpu0 only", got)
	}
	if got := seriesOf(t, m, nameEjections); len(got) != len(evidence.Ejections) {
		t.Fatalf("ejections %v, want gpu0's only", got)
	}
	// The interval series of a removed member is made again when asked.
	m.Intervals("ns/rr", "gpu2").Observe(0.02)
	if got := seriesOf(t, m, nameInterToken); got["ns/rr/gpu2/"] != 1 {
		t.Fatalf("inter-token latency %v, want gpu2's series made afresh", got)
	}
}

// TestRequestMetricsLatency proves an admitted request's time to first
// token, duration (by stream outcome) and tokens are observed, and that a
// request without first token or usage observes neither.
func TestRequestMetricsLatency(t *testing.T) {
	m := NewRequestMetrics()
	m.Record(router.Outcome{Tier: "ns/t", Alias: "t", Result: router.ResultAdmitted, Member: "gpu0", Status: 200,
		End: router.EndComplete, FirstToken: 300 * time.Millisecond, Duration: 4 * time.Second,
		Usage: sse.Usage{Prompt: 120, Completion: 40}, HasUsage: true})
	m.Record(router.Outcome{Tier: "ns/t", Alias: "t", Result: router.ResultAdmitted, Member: "gpu0", Status: 200,
		End: router.EndClientGone, Duration: 50 * time.Millisecond})
	m.Record(router.Outcome{Tier: "ns/t", Alias: "t", Result: router.ResultNotAdmitted, Code: "capacity_exhausted"})
	reg := NewRegistry(m)
	for _, tc := range []struct {
		name   string
		labels string
		count  uint64
		sum    float64
	}{
		{nameFirstToken, "ns/t/gpu0/", 1, 0.3},
		{nameRequestDuration, "ns/t/gpu0/complete", 1, 4},
		{nameRequestDuration, "ns/t/gpu0/client_gone", 1, 0.05},
	} {
		h := histogramOf(t, reg, tc.name, tc.labels)
		if h.GetSampleCount() != tc.count || h.GetSampleSum() != tc.sum {
			t.Errorf("%s{%s}: count %d sum %v, want %d and %v", tc.name, tc.labels, h.GetSampleCount(), h.GetSampleSum(), tc.count, tc.sum)
		}
	}
	if got := seriesOf(t, m, nameTokens); got["ns/t/gpu0/prompt"] != 120 || got["ns/t/gpu0/completion"] != 40 || len(got) != 2 {
		t.Fatalf("tokens %v, want 120 prompt and 40 completion", got)
	}
	if got := seriesOf(t, m, nameRequestDuration); len(got) != 2 {
		t.Fatalf("durations %v, want the two admitted requests' outcomes only", got)
	}
}

// histogramOf returns the histogram of name whose tier/member/outcome
// labels are labels.
func histogramOf(t *testing.T, reg *prometheus.Registry, name, labels string) *dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l[labelTier]+"/"+l[labelMember]+"/"+l[labelOutcome] == labels {
				return s.GetHistogram()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, labels)
	return nil
}

// TestRequestMetricsNotSent proves a request whose first member never saw
// it counts that member's ejection, whether its second admission was
// served by another member or refused, and counts the request once, under
// its second admission's member and outcome.
func TestRequestMetricsNotSent(t *testing.T) {
	m := NewRequestMetrics()
	m.Record(router.Outcome{Tier: "ns/cap", Alias: "cap", Result: router.ResultAdmitted, Member: "gpu1", Status: 200,
		End: router.EndComplete, NotSentMember: "gpu0", NotSentEjection: router.EjectRefused})
	m.Record(router.Outcome{Tier: "ns/cap", Alias: "cap", Result: router.ResultNotAdmitted, Code: "no_eligible_member",
		Status: 503, NotSentMember: "gpu0", NotSentEjection: router.EjectReset})
	want := `
# HELP sluice_requests_total Inference requests by tier, member and outcome (admitted, not_admitted, refused).
# TYPE sluice_requests_total counter
sluice_requests_total{member="",outcome="not_admitted",tier="ns/cap"} 1
sluice_requests_total{member="",outcome="refused",tier=""} 0
sluice_requests_total{member="gpu1",outcome="admitted",tier="ns/cap"} 1
# HELP sluice_member_ejections_total Members taken out of selection until a readiness probe passes, by reason (connection_refused, connection_reset, connection_closed).
# TYPE sluice_member_ejections_total counter
sluice_member_ejections_total{member="gpu0",reason="connection_refused",tier="ns/cap"} 1
sluice_member_ejections_total{member="gpu0",reason="connection_reset",tier="ns/cap"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), nameRequests, nameEjections); err != nil {
		t.Fatal(err)
	}
}
