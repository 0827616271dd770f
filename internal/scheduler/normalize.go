package scheduler

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Normalize turns one engine sample into a Pressure. observedAt is when the
// sample was taken and now is the caller's current time, both read from the
// caller's clock; successful says whether the collection succeeded; capacity
// is the member's configured ceiling; t holds the signals as scraped.
//
// The request signal is the running+waiting pair: it is valid when both
// counts are supplied, finite, integral and within 0..MaxCount, and capacity
// is within MinCapacity..MaxCapacity. One count without the other is missing,
// never zero. A capacity out of bounds makes the request signal invalid. The
// KV signal is valid when supplied, finite and within 0..1. Request pressure
// is ceil((running+waiting)·PPMScale/capacity), computed exactly in integers
// and not clamped at PPMScale; KV pressure is ceil(kv·PPMScale) of the float64
// product. The pressure is the larger of the valid ones.
//
// The class is decided in this order: an unsuccessful collection is
// FreshnessFailed whatever it carries; a zero time or an observation in the
// future is FreshnessUnknown; any invalid signal makes the whole pressure
// FreshnessUnknown (invalid wins over missing), as does having no valid
// signal; a sample older than MaxSampleAge is FreshnessStale; otherwise it is
// FreshnessFresh. An age of exactly MaxSampleAge is still fresh. Only a fresh
// pressure carries a PPM; every other class has PPM zero. The signal states
// always describe the telemetry, whatever the class.
func Normalize(observedAt, now time.Time, successful bool, capacity int, t Telemetry) Pressure {
	requestState, requestPPM := requestSignal(capacity, t.Running, t.Waiting)
	kvState, kvPPM := kvSignal(t.KVUsage)
	p := Pressure{Freshness: FreshnessUnknown, RequestState: requestState, KVState: kvState}

	switch {
	case !successful:
		p.Freshness = FreshnessFailed
		return p
	case observedAt.IsZero() || now.IsZero():
		return p
	}
	age := now.Sub(observedAt)
	switch {
	case age < 0:
		return p
	case requestState == SignalInvalid || kvState == SignalInvalid:
		return p
	case requestState != SignalValid && kvState != SignalValid:
		return p
	case age > MaxSampleAge:
		p.Freshness = FreshnessStale
		return p
	}
	p.Freshness = FreshnessFresh
	p.PPM = max(requestPPM, kvPPM)
	return p
}

// requestSignal classifies the running+waiting pair and computes its pressure
// when it is valid.
func requestSignal(capacity int, running, waiting *float64) (SignalState, int64) {
	r, rState := count(running)
	w, wState := count(waiting)
	switch {
	case rState == SignalInvalid || wState == SignalInvalid:
		return SignalInvalid, 0
	case capacity < bounds.MinConcurrency || capacity > bounds.MaxConcurrency:
		return SignalInvalid, 0
	case rState == SignalMissing || wState == SignalMissing:
		return SignalMissing, 0
	}
	c := int64(capacity)
	// (r+w) ≤ 2·MaxCount, so the numerator is at most 2e15 + 1e5: exact in int64.
	return SignalValid, ((r+w)*PPMScale + c - 1) / c
}

// count validates one request count as scraped.
func count(v *float64) (int64, SignalState) {
	if v == nil {
		return 0, SignalMissing
	}
	f := *v
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < 0 || f > MaxCount {
		return 0, SignalInvalid
	}
	return int64(f), SignalValid
}

// kvSignal classifies the KV cache usage fraction and computes its pressure
// when it is valid.
func kvSignal(kv *float64) (SignalState, int64) {
	if kv == nil {
		return SignalMissing, 0
	}
	f := *kv
	if math.IsNaN(f) || f < 0 || f > 1 {
		return SignalInvalid, 0
	}
	return SignalValid, int64(math.Ceil(f * PPMScale))
}
