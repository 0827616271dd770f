package scheduler_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// f returns a pointer to v, for building Telemetry literals.
func f(v float64) *float64 { return &v }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestNormalize(t *testing.T) {
	const (
		fresh   = scheduler.FreshnessFresh
		stale   = scheduler.FreshnessStale
		failed  = scheduler.FreshnessFailed
		unknown = scheduler.FreshnessUnknown
		valid   = scheduler.SignalValid
		missing = scheduler.SignalMissing
		invalid = scheduler.SignalInvalid
	)
	type want = scheduler.Pressure
	tests := []struct {
		desc         string
		age          time.Duration // now − observedAt.
		zeroObserved bool
		nowZero      bool
		failed       bool
		capacity     int
		tel          scheduler.Telemetry
		want         want
	}{
		// Request pressure: ceil((running+waiting)·1e6/capacity), exact.
		{desc: "request exact division", capacity: 4, tel: scheduler.Telemetry{Running: f(1), Waiting: f(1)},
			want: want{Freshness: fresh, PPM: 500_000, RequestState: valid, KVState: missing}},
		{desc: "request rounds up", capacity: 3, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0)},
			want: want{Freshness: fresh, PPM: 333_334, RequestState: valid, KVState: missing}},
		{desc: "request rounds up a tiny remainder", capacity: 99_999, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0)},
			want: want{Freshness: fresh, PPM: 11, RequestState: valid, KVState: missing}},
		{desc: "request at max capacity", capacity: 100_000, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0)},
			want: want{Freshness: fresh, PPM: 10, RequestState: valid, KVState: missing}},
		{desc: "request idle is zero", capacity: 8, tel: scheduler.Telemetry{Running: f(0), Waiting: f(0)},
			want: want{Freshness: fresh, PPM: 0, RequestState: valid, KVState: missing}},
		{desc: "request above capacity is not clamped", capacity: 2, tel: scheduler.Telemetry{Running: f(10), Waiting: f(5)},
			want: want{Freshness: fresh, PPM: 7_500_000, RequestState: valid, KVState: missing}},
		{desc: "request at the 2e15 bound", capacity: 1, tel: scheduler.Telemetry{Running: f(1e9), Waiting: f(1e9)},
			want: want{Freshness: fresh, PPM: 2_000_000_000_000_000, RequestState: valid, KVState: missing}},
		{desc: "negative zero count is zero", capacity: 2, tel: scheduler.Telemetry{Running: f(math.Copysign(0, -1)), Waiting: f(1)},
			want: want{Freshness: fresh, PPM: 500_000, RequestState: valid, KVState: missing}},

		// KV pressure and the maximum of both.
		{desc: "KV only is fresh", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(0.25)},
			want: want{Freshness: fresh, PPM: 250_000, RequestState: missing, KVState: valid}},
		{desc: "KV rounds up", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(0.0000005)},
			want: want{Freshness: fresh, PPM: 1, RequestState: missing, KVState: valid}},
		{desc: "KV empty", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(0)},
			want: want{Freshness: fresh, PPM: 0, RequestState: missing, KVState: valid}},
		{desc: "KV full", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(1)},
			want: want{Freshness: fresh, PPM: 1_000_000, RequestState: missing, KVState: valid}},
		{desc: "max picks KV", capacity: 4, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0), KVUsage: f(0.5)},
			want: want{Freshness: fresh, PPM: 500_000, RequestState: valid, KVState: valid}},
		{desc: "max picks requests", capacity: 4, tel: scheduler.Telemetry{Running: f(3), Waiting: f(3), KVUsage: f(0.5)},
			want: want{Freshness: fresh, PPM: 1_500_000, RequestState: valid, KVState: valid}},

		// Missing signals.
		{desc: "nothing supplied", capacity: 4,
			want: want{Freshness: unknown, RequestState: missing, KVState: missing}},
		{desc: "running without waiting is missing", capacity: 4, tel: scheduler.Telemetry{Running: f(3)},
			want: want{Freshness: unknown, RequestState: missing, KVState: missing}},
		{desc: "waiting without running is missing", capacity: 4, tel: scheduler.Telemetry{Waiting: f(3)},
			want: want{Freshness: unknown, RequestState: missing, KVState: missing}},
		{desc: "running without waiting never counts as zero", capacity: 4, tel: scheduler.Telemetry{Running: f(3), KVUsage: f(0.1)},
			want: want{Freshness: fresh, PPM: 100_000, RequestState: missing, KVState: valid}},

		// Malformed values: the whole pressure is unknown, invalid wins over missing.
		{desc: "negative count", capacity: 4, tel: scheduler.Telemetry{Running: f(-1), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "non-integral count", capacity: 4, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0.5)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "NaN count", capacity: 4, tel: scheduler.Telemetry{Running: f(math.NaN()), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "+Inf count", capacity: 4, tel: scheduler.Telemetry{Running: f(0), Waiting: f(math.Inf(1))},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "-Inf count", capacity: 4, tel: scheduler.Telemetry{Running: f(math.Inf(-1)), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "count above 1e9", capacity: 4, tel: scheduler.Telemetry{Running: f(1e9 + 1), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "count of exactly 1e9 is valid", capacity: 100_000, tel: scheduler.Telemetry{Running: f(1e9), Waiting: f(0)},
			want: want{Freshness: fresh, PPM: 10_000_000_000, RequestState: valid, KVState: missing}},
		{desc: "invalid half beats missing half", capacity: 4, tel: scheduler.Telemetry{Running: f(-1)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "invalid request beats valid KV", capacity: 4, tel: scheduler.Telemetry{Running: f(1.5), Waiting: f(0), KVUsage: f(0.2)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: valid}},
		{desc: "KV above one", capacity: 4, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0), KVUsage: f(1.0000001)},
			want: want{Freshness: unknown, RequestState: valid, KVState: invalid}},
		{desc: "KV negative", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(-0.1)},
			want: want{Freshness: unknown, RequestState: missing, KVState: invalid}},
		{desc: "KV NaN", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(math.NaN())},
			want: want{Freshness: unknown, RequestState: missing, KVState: invalid}},
		{desc: "KV +Inf", capacity: 4, tel: scheduler.Telemetry{KVUsage: f(math.Inf(1))},
			want: want{Freshness: unknown, RequestState: missing, KVState: invalid}},
		{desc: "capacity zero", capacity: 0, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "capacity above bound", capacity: 100_001, tel: scheduler.Telemetry{Running: f(1), Waiting: f(0)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: missing}},
		{desc: "capacity invalid poisons KV-only sample", capacity: -1, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: unknown, RequestState: invalid, KVState: valid}},

		// Freshness edges.
		{desc: "age zero is fresh", age: 0, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: fresh, PPM: 500_000, RequestState: missing, KVState: valid}},
		{desc: "age exactly 5s is fresh", age: 5 * time.Second, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: fresh, PPM: 500_000, RequestState: missing, KVState: valid}},
		{desc: "age 5s+1ns is stale", age: 5*time.Second + 1, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: stale, RequestState: missing, KVState: valid}},
		{desc: "old is stale", age: time.Hour, capacity: 2, tel: scheduler.Telemetry{Running: f(1), Waiting: f(1)},
			want: want{Freshness: stale, RequestState: valid, KVState: missing}},
		{desc: "future observation is unknown", age: -1, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: unknown, RequestState: missing, KVState: valid}},
		{desc: "zero observation time is unknown", zeroObserved: true, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: unknown, RequestState: missing, KVState: valid}},
		{desc: "zero now is unknown", nowZero: true, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: unknown, RequestState: missing, KVState: valid}},
		{desc: "unsuccessful is failed even with valid data", failed: true, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(0.5)},
			want: want{Freshness: failed, RequestState: missing, KVState: valid}},
		{desc: "unsuccessful is failed with zero times", failed: true, nowZero: true, capacity: 2,
			want: want{Freshness: failed, RequestState: missing, KVState: missing}},
		{desc: "unsuccessful is failed with malformed data", failed: true, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(2)},
			want: want{Freshness: failed, RequestState: missing, KVState: invalid}},
		{desc: "old and malformed is unknown, not stale", age: time.Hour, capacity: 2, tel: scheduler.Telemetry{KVUsage: f(2)},
			want: want{Freshness: unknown, RequestState: missing, KVState: invalid}},
		{desc: "old and empty is unknown, not stale", age: time.Hour, capacity: 2,
			want: want{Freshness: unknown, RequestState: missing, KVState: missing}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			observedAt, now := t0, t0.Add(tt.age)
			if tt.zeroObserved {
				observedAt = time.Time{}
			}
			if tt.nowZero {
				now = time.Time{}
			}
			got := scheduler.Normalize(observedAt, now, !tt.failed, tt.capacity, tt.tel)
			if got != tt.want {
				t.Errorf("Normalize() = %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Normalize() produced a pressure that fails Validate: %v", err)
			}
		})
	}
}

func TestNormalizeMonotonicEdges(t *testing.T) {
	if scheduler.MaxSampleAge != 5*time.Second {
		t.Fatalf("MaxSampleAge = %v, want 5s as SPEC §7 fixes it", scheduler.MaxSampleAge)
	}
	// Times carrying a monotonic reading (as from a real clock) compare by it.
	observedAt := time.Now()
	tel := scheduler.Telemetry{Running: f(0), Waiting: f(0)}
	if got := scheduler.Normalize(observedAt, observedAt.Add(scheduler.MaxSampleAge), true, 1, tel); got.Freshness != scheduler.FreshnessFresh {
		t.Errorf("Freshness = %q at exactly MaxSampleAge, want fresh", got.Freshness)
	}
	if got := scheduler.Normalize(observedAt, observedAt.Add(scheduler.MaxSampleAge+1), true, 1, tel); got.Freshness != scheduler.FreshnessStale {
		t.Errorf("Freshness = %q at MaxSampleAge+1ns, want stale", got.Freshness)
	}
}

func TestPressureValidate(t *testing.T) {
	tests := []struct {
		desc string
		p    scheduler.Pressure
		ok   bool
	}{
		{"unknown pressure", scheduler.UnknownPressure(), true},
		{"fresh request", scheduler.Pressure{Freshness: "fresh", PPM: 2_000_000_000_000_000, RequestState: "valid", KVState: "missing"}, true},
		{"fresh KV only", scheduler.Pressure{Freshness: "fresh", PPM: 1_000_000, RequestState: "missing", KVState: "valid"}, true},
		{"fresh KV only above 1e6", scheduler.Pressure{Freshness: "fresh", PPM: 1_000_001, RequestState: "missing", KVState: "valid"}, false},
		{"fresh above 2e15", scheduler.Pressure{Freshness: "fresh", PPM: 2_000_000_000_000_001, RequestState: "valid", KVState: "valid"}, false},
		{"fresh negative PPM", scheduler.Pressure{Freshness: "fresh", PPM: -1, RequestState: "valid", KVState: "valid"}, false},
		{"fresh without valid signal", scheduler.Pressure{Freshness: "fresh", RequestState: "missing", KVState: "missing"}, false},
		{"fresh with invalid signal", scheduler.Pressure{Freshness: "fresh", RequestState: "valid", KVState: "invalid"}, false},
		{"stale", scheduler.Pressure{Freshness: "stale", RequestState: "valid", KVState: "missing"}, true},
		{"stale with PPM", scheduler.Pressure{Freshness: "stale", PPM: 5, RequestState: "valid", KVState: "missing"}, false},
		{"stale with invalid signal", scheduler.Pressure{Freshness: "stale", RequestState: "valid", KVState: "invalid"}, false},
		{"stale without valid signal", scheduler.Pressure{Freshness: "stale", RequestState: "missing", KVState: "missing"}, false},
		{"failed with anything", scheduler.Pressure{Freshness: "failed", RequestState: "invalid", KVState: "valid"}, true},
		{"failed with PPM", scheduler.Pressure{Freshness: "failed", PPM: 1, RequestState: "missing", KVState: "missing"}, false},
		{"unknown with PPM", scheduler.Pressure{Freshness: "unknown", PPM: 1, RequestState: "missing", KVState: "missing"}, false},
		{"unknown freshness string", scheduler.Pressure{Freshness: "warm", RequestState: "missing", KVState: "missing"}, false},
		{"zero value", scheduler.Pressure{}, false},
		{"unknown request state", scheduler.Pressure{Freshness: "unknown", RequestState: "", KVState: "missing"}, false},
		{"unknown KV state", scheduler.Pressure{Freshness: "unknown", RequestState: "missing", KVState: "partial"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.ok && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, scheduler.ErrInvalidPressure) {
				t.Fatalf("Validate() = %v, want ErrInvalidPressure", err)
			}
		})
	}
}

func TestValidMemberID(t *testing.T) {
	for _, id := range []string{"gpu0", "a", "0", "a-b", "a--b", "abcdefghijklmnopqrstuvwxyz012345"} {
		if !scheduler.ValidMemberID(id) {
			t.Errorf("ValidMemberID(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", "-a", "a-", "A", "a_b", "a.b", "gpü", "abcdefghijklmnopqrstuvwxyz0123456"} {
		if scheduler.ValidMemberID(id) {
			t.Errorf("ValidMemberID(%q) = true, want false", id)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	tel := scheduler.Telemetry{Running: f(3), Waiting: f(1), KVUsage: f(0.42)}
	now := t0.Add(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = scheduler.Normalize(t0, now, true, 8, tel)
	}
}
