package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-dev/sluice/internal/router"
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
