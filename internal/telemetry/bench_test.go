package telemetry

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// BenchmarkRecorders measures everything the router's Recorder does per
// request in cmd/router: the decision record (Outcome.Evidence, the payload
// check and the ring append) and the request metrics, for a Capacity
// request carrying a two-row selection and for a RoundRobin request. The
// selection is allocated by the lease, outside this measurement.
func BenchmarkRecorders(b *testing.B) {
	d, err := scheduler.Rank([]string{"gpu0", "gpu1"}, 0, []scheduler.Candidate{
		{MemberID: "gpu0", Eligible: true, Active: 0, Capacity: 4, Pressure: freshPressure},
		{MemberID: "gpu1", Eligible: true, Active: 1, Capacity: 4, Pressure: stalePressure},
	})
	if err != nil {
		b.Fatal(err)
	}
	capacity := router.Outcome{RequestID: "0123456789abcdef-1", Start: t0, Duration: 20 * time.Millisecond, Alias: "cap",
		Tier: "ns/cap", Result: router.ResultAdmitted, Status: 200, Member: "gpu0", FirstByte: 5 * time.Millisecond,
		End: router.EndComplete, Schedule: 2 * time.Microsecond, Dispatch: 30 * time.Microsecond, Selection: &d}
	roundRobin := capacity
	roundRobin.Tier, roundRobin.Alias, roundRobin.Selection = "ns/rr", "rr", nil
	for _, bc := range []struct {
		name string
		o    router.Outcome
	}{{"capacity", capacity}, {"round-robin", roundRobin}} {
		log, _ := evidence.NewLog(evidence.LogOptions{Size: evidence.DefaultLogSize})
		rec := router.Recorders{router.EvidenceRecorder(log), NewRequestMetrics()}
		b.Run(bc.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec.Record(bc.o)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rec.Record(bc.o)
				}
			})
		})
	}
}
