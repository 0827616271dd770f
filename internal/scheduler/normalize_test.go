package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
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
		t.Fatalf("MaxSampleAge = %v, want 5s as docs/SCORING.md#freshness-classes states", scheduler.MaxSampleAge)
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
		{"fresh request", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 2_000_000_000_000_000, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}, true},
		{"fresh KV only", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 1_000_000, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalValid}, true},
		{"fresh KV only above 1e6", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 1_000_001, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalValid}, false},
		{"fresh above 2e15", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 2_000_000_000_000_001, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}, false},
		{"fresh negative PPM", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: -1, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}, false},
		{"fresh without valid signal", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}, false},
		{"fresh with invalid signal", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, RequestState: scheduler.SignalValid, KVState: scheduler.SignalInvalid}, false},
		{"stale", scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}, true},
		{"stale with PPM", scheduler.Pressure{Freshness: scheduler.FreshnessStale, PPM: 5, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}, false},
		{"stale with invalid signal", scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalValid, KVState: scheduler.SignalInvalid}, false},
		{"stale without valid signal", scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}, false},
		{"failed with anything", scheduler.Pressure{Freshness: scheduler.FreshnessFailed, RequestState: scheduler.SignalInvalid, KVState: scheduler.SignalValid}, true},
		{"failed with PPM", scheduler.Pressure{Freshness: scheduler.FreshnessFailed, PPM: 1, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}, false},
		{"unknown with PPM", scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, PPM: 1, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}, false},
		{"freshness outside the set", scheduler.Pressure{Freshness: scheduler.Freshness(9), RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}, false},
		{"zero value", scheduler.Pressure{}, false},
		{"zero request state", scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalState(0), KVState: scheduler.SignalMissing}, false},
		{"KV state outside the set", scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalState(4)}, false},
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

// TestPressureValidateExhaustive checks Validate on every combination of
// class and signal states, including values outside each set, at the PPM
// bounds, against the rules stated one by one.
func TestPressureValidateExhaustive(t *testing.T) {
	want := func(p scheduler.Pressure) bool {
		states := []scheduler.SignalState{scheduler.SignalValid, scheduler.SignalMissing, scheduler.SignalInvalid}
		if !slices.Contains(states, p.RequestState) || !slices.Contains(states, p.KVState) {
			return false
		}
		anyInvalid := p.RequestState == scheduler.SignalInvalid || p.KVState == scheduler.SignalInvalid
		anyValid := p.RequestState == scheduler.SignalValid || p.KVState == scheduler.SignalValid
		switch p.Freshness {
		case scheduler.FreshnessFresh:
			limit := int64(scheduler.MaxKVPPM)
			if p.RequestState == scheduler.SignalValid {
				limit = scheduler.MaxRequestPPM
			}
			return !anyInvalid && anyValid && p.PPM >= 0 && p.PPM <= limit
		case scheduler.FreshnessStale:
			return !anyInvalid && anyValid && p.PPM == 0
		case scheduler.FreshnessFailed, scheduler.FreshnessUnknown:
			return p.PPM == 0
		default:
			return false
		}
	}
	ppms := []int64{math.MinInt64, -1, 0, 1, scheduler.MaxKVPPM, scheduler.MaxKVPPM + 1,
		scheduler.MaxRequestPPM, scheduler.MaxRequestPPM + 1, math.MaxInt64}
	accepted := 0
	for f := range 7 {
		for r := range 6 {
			for k := range 6 {
				for _, ppm := range ppms {
					p := scheduler.Pressure{Freshness: scheduler.Freshness(f), PPM: ppm,
						RequestState: scheduler.SignalState(r), KVState: scheduler.SignalState(k)}
					err := p.Validate()
					if ok := want(p); ok != (err == nil) || (err != nil && err != scheduler.ErrInvalidPressure) {
						t.Errorf("%+v: Validate() = %v, want valid %v", p, err, ok)
					}
					if err == nil {
						accepted++
					}
				}
			}
		}
	}
	// fresh: request valid (3 KV states but invalid → 2) × 5 PPMs up to
	// MaxRequestPPM, request missing with KV valid × 3 PPMs up to MaxKVPPM;
	// stale: 3 usable state pairs × PPM 0; failed and unknown: 9 pairs × PPM 0.
	if want := 2*5 + 3 + 3 + 2*9; accepted != want {
		t.Errorf("%d pressures accepted, want %d", accepted, want)
	}
}

// TestTextForms checks that the classes and states read and write as their
// names, and that values outside the sets are refused both ways.
func TestTextForms(t *testing.T) {
	for name, f := range map[string]scheduler.Freshness{"fresh": scheduler.FreshnessFresh,
		"stale": scheduler.FreshnessStale, "failed": scheduler.FreshnessFailed, "unknown": scheduler.FreshnessUnknown} {
		if f.String() != name {
			t.Errorf("String() = %q, want %q", f.String(), name)
		}
		text, err := f.MarshalText()
		if err != nil || string(text) != name {
			t.Errorf("MarshalText() = %q, %v; want %q", text, err, name)
		}
		var back scheduler.Freshness
		if err := back.UnmarshalText([]byte(name)); err != nil || back != f {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, back, err)
		}
		if got, err := scheduler.ParseFreshness(name); err != nil || got != f {
			t.Errorf("ParseFreshness(%q) = %v, %v", name, got, err)
		}
	}
	for name, s := range map[string]scheduler.SignalState{"valid": scheduler.SignalValid,
		"missing": scheduler.SignalMissing, "invalid": scheduler.SignalInvalid} {
		text, err := s.MarshalText()
		if s.String() != name || err != nil || string(text) != name {
			t.Errorf("%d: String() = %q, MarshalText() = %q, %v; want %q", s, s.String(), text, err, name)
		}
		var back scheduler.SignalState
		if err := back.UnmarshalText([]byte(name)); err != nil || back != s {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, back, err)
		}
	}

	for _, f := range []scheduler.Freshness{0, scheduler.FreshnessUnknown + 1, 255} {
		if _, err := f.MarshalText(); err != scheduler.ErrInvalidPressure {
			t.Errorf("Freshness(%d).MarshalText() error = %v, want ErrInvalidPressure", f, err)
		}
		if want := fmt.Sprintf("Freshness(%d)", f); f.String() != want {
			t.Errorf("String() = %q, want %q", f.String(), want)
		}
	}
	for _, s := range []scheduler.SignalState{0, scheduler.SignalInvalid + 1} {
		if _, err := s.MarshalText(); err != scheduler.ErrInvalidPressure {
			t.Errorf("SignalState(%d).MarshalText() error = %v, want ErrInvalidPressure", s, err)
		}
		if want := fmt.Sprintf("SignalState(%d)", s); s.String() != want {
			t.Errorf("String() = %q, want %q", s.String(), want)
		}
	}
	for _, text := range []string{"", "Fresh", "warm", "fresh ", "valid"} {
		f := scheduler.FreshnessStale
		if err := f.UnmarshalText([]byte(text)); err != scheduler.ErrInvalidPressure || f != scheduler.FreshnessStale {
			t.Errorf("Freshness.UnmarshalText(%q) = %v, left %v; want ErrInvalidPressure, unchanged", text, err, f)
		}
		if _, err := scheduler.ParseFreshness(text); err != scheduler.ErrInvalidPressure {
			t.Errorf("ParseFreshness(%q) error = %v, want ErrInvalidPressure", text, err)
		}
	}
	for _, text := range []string{"", "Valid", "fresh", "partial"} {
		s := scheduler.SignalMissing
		if err := s.UnmarshalText([]byte(text)); err != scheduler.ErrInvalidPressure || s != scheduler.SignalMissing {
			t.Errorf("SignalState.UnmarshalText(%q) = %v, left %v; want ErrInvalidPressure, unchanged", text, err, s)
		}
	}

	// In JSON a pressure reads and writes its class and states by name.
	p := scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 7, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
	b, err := json.Marshal(p)
	if want := `{"Freshness":"fresh","PPM":7,"RequestState":"valid","KVState":"missing"}`; err != nil || string(b) != want {
		t.Fatalf("json.Marshal = %s, %v; want %s", b, err, want)
	}
	var back scheduler.Pressure
	if err := json.Unmarshal(b, &back); err != nil || back != p {
		t.Fatalf("json.Unmarshal = %+v, %v; want %+v", back, err, p)
	}
	if _, err := json.Marshal(scheduler.Pressure{}); err == nil {
		t.Fatal("json.Marshal of the zero Pressure succeeded; its class is outside the set")
	}
}

func TestValidMemberID(t *testing.T) {
	for _, id := range []string{"gpu0", "a", "0", "a-b", "a--b", "abcdefghijklmnopqrstuvwxyz012345"} {
		if !bounds.ValidMemberID(id) {
			t.Errorf("ValidMemberID(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", "-a", "a-", "A", "a_b", "a.b", "gpü", "abcdefghijklmnopqrstuvwxyz0123456"} {
		if bounds.ValidMemberID(id) {
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
