package scheduler

// Freshness classifies how trustworthy an upstream pressure sample is.
type Freshness string

// The closed set of Freshness values. Every class other than FreshnessFresh
// ranks as upstream unknown.
const (
	// FreshnessFresh is a successful sample at most MaxSampleAge old with at
	// least one valid signal.
	FreshnessFresh Freshness = "fresh"
	// FreshnessStale is a successful, valid sample older than MaxSampleAge.
	FreshnessStale Freshness = "stale"
	// FreshnessFailed is a sample whose collection did not succeed.
	FreshnessFailed Freshness = "failed"
	// FreshnessUnknown is a sample with no valid signal, a malformed signal or
	// unusable observation times, and the state of a member never sampled.
	FreshnessUnknown Freshness = "unknown"
)

// SignalState says whether one pressure signal contributed to a sample.
type SignalState string

// The closed set of SignalState values.
const (
	// SignalValid means the signal was supplied and within bounds.
	SignalValid SignalState = "valid"
	// SignalMissing means the signal was not supplied (or only half of the
	// running/waiting pair was).
	SignalMissing SignalState = "missing"
	// SignalInvalid means the signal was supplied but malformed.
	SignalInvalid SignalState = "invalid"
)

// Telemetry is one engine sample as scraped, before normalization. A nil field
// is a signal the engine did not report.
type Telemetry struct {
	// Running is the number of requests the engine is executing.
	Running *float64
	// Waiting is the number of requests queued inside the engine.
	Waiting *float64
	// KVUsage is the fraction of the KV cache in use, 0..1.
	KVUsage *float64
}

// Pressure is one member's normalized upstream pressure.
type Pressure struct {
	// Freshness is the class of the sample.
	Freshness Freshness
	// PPM is the pressure in parts per million of the member's capacity. It is
	// meaningful only when Freshness is FreshnessFresh and zero otherwise.
	PPM int64
	// RequestState is the state of the running+waiting request signal.
	RequestState SignalState
	// KVState is the state of the KV cache usage signal.
	KVState SignalState
}

// UnknownPressure is the pressure of a member with no usable sample.
func UnknownPressure() Pressure {
	return Pressure{Freshness: FreshnessUnknown, RequestState: SignalMissing, KVState: SignalMissing}
}

// Validate reports whether p is a value Normalize can produce. It returns
// ErrInvalidPressure when the class or a signal state is outside its closed
// set; when a fresh pressure has an invalid signal, no valid signal, or a PPM
// outside 0..MaxRequestPPM (0..MaxKVPPM when only the KV signal is valid);
// when a stale pressure has an invalid signal or no valid signal; and when a
// pressure that is not fresh carries a PPM.
func (p Pressure) Validate() error {
	if !p.RequestState.valid() || !p.KVState.valid() {
		return ErrInvalidPressure
	}
	signalsUsable := p.RequestState != SignalInvalid && p.KVState != SignalInvalid &&
		(p.RequestState == SignalValid || p.KVState == SignalValid)
	switch p.Freshness {
	case FreshnessFresh:
		limit := int64(MaxRequestPPM)
		if p.RequestState != SignalValid {
			limit = MaxKVPPM
		}
		if !signalsUsable || p.PPM < 0 || p.PPM > limit {
			return ErrInvalidPressure
		}
		return nil
	case FreshnessStale:
		if !signalsUsable {
			return ErrInvalidPressure
		}
	case FreshnessFailed, FreshnessUnknown:
	default:
		return ErrInvalidPressure
	}
	if p.PPM != 0 {
		return ErrInvalidPressure
	}
	return nil
}

// valid reports whether s is one of the closed set of signal states.
func (s SignalState) valid() bool {
	return s == SignalValid || s == SignalMissing || s == SignalInvalid
}
