package scheduler

import "strconv"

// Freshness classifies how trustworthy an upstream pressure sample is. It is
// a small integer so that a Pressure holds no pointer and compares in one
// instruction; its text form (String, MarshalText) is the class name. The zero
// value is not a class.
type Freshness uint8

// The closed set of Freshness values. Every class other than FreshnessFresh
// ranks as upstream unknown.
const (
	// FreshnessFresh is a successful sample at most MaxSampleAge old with at
	// least one valid signal.
	FreshnessFresh Freshness = iota + 1
	// FreshnessStale is a successful, valid sample older than MaxSampleAge.
	FreshnessStale
	// FreshnessFailed is a sample whose collection did not succeed.
	FreshnessFailed
	// FreshnessUnknown is a sample with no valid signal, a malformed signal or
	// unusable observation times, and the state of a member never sampled.
	FreshnessUnknown
)

// freshnessNames are the text forms of the Freshness classes.
var freshnessNames = [...]string{
	FreshnessFresh:   "fresh",
	FreshnessStale:   "stale",
	FreshnessFailed:  "failed",
	FreshnessUnknown: "unknown",
}

// Valid reports whether f is one of the closed set of classes.
func (f Freshness) Valid() bool { return named(freshnessNames[:], f) }

// String returns the class name: fresh, stale, failed or unknown, and
// "Freshness(n)" for a value outside the set.
func (f Freshness) String() string { return nameOf(freshnessNames[:], "Freshness", f) }

// MarshalText returns the class name. It returns ErrInvalidPressure for a
// value outside the set, so no evidence ever carries a class that does not
// exist.
func (f Freshness) MarshalText() ([]byte, error) { return marshalName(freshnessNames[:], f) }

// UnmarshalText sets f from a class name. Any other text returns
// ErrInvalidPressure and leaves f unchanged.
func (f *Freshness) UnmarshalText(text []byte) error {
	return unmarshalName(freshnessNames[:], text, f)
}

// ParseFreshness returns the class named s, or ErrInvalidPressure when s
// names none.
func ParseFreshness(s string) (Freshness, error) { return parseName[Freshness](freshnessNames[:], s) }

// SignalState says whether one pressure signal contributed to a sample. Like
// Freshness it is a small integer whose text form is the state name, and its
// zero value is not a state.
type SignalState uint8

// The closed set of SignalState values.
const (
	// SignalValid means the signal was supplied and within bounds.
	SignalValid SignalState = iota + 1
	// SignalMissing means the signal was not supplied (or only half of the
	// running/waiting pair was).
	SignalMissing
	// SignalInvalid means the signal was supplied but malformed.
	SignalInvalid
)

// signalStateNames are the text forms of the SignalState values.
var signalStateNames = [...]string{
	SignalValid:   "valid",
	SignalMissing: "missing",
	SignalInvalid: "invalid",
}

// Valid reports whether s is one of the closed set of signal states.
func (s SignalState) Valid() bool { return named(signalStateNames[:], s) }

// String returns the state name: valid, missing or invalid, and
// "SignalState(n)" for a value outside the set.
func (s SignalState) String() string { return nameOf(signalStateNames[:], "SignalState", s) }

// MarshalText returns the state name, or ErrInvalidPressure for a value
// outside the set.
func (s SignalState) MarshalText() ([]byte, error) { return marshalName(signalStateNames[:], s) }

// UnmarshalText sets s from a state name. Any other text returns
// ErrInvalidPressure and leaves s unchanged.
func (s *SignalState) UnmarshalText(text []byte) error {
	return unmarshalName(signalStateNames[:], text, s)
}

// The text forms of Freshness and SignalState: names[v] is the name of value
// v, and names[0], the zero value's, is empty because the zero value is in
// neither set.

// named reports whether v has a name.
func named[T ~uint8](names []string, v T) bool { return v != 0 && int(v) < len(names) }

// nameOf returns the name of v, or kind(v) when v has none.
func nameOf[T ~uint8](names []string, kind string, v T) string {
	if !named(names, v) {
		return kind + "(" + strconv.Itoa(int(v)) + ")"
	}
	return names[v]
}

// marshalName returns the name of v, or ErrInvalidPressure when v has none.
func marshalName[T ~uint8](names []string, v T) ([]byte, error) {
	if !named(names, v) {
		return nil, ErrInvalidPressure
	}
	return []byte(names[v]), nil
}

// parseName returns the value named s, or ErrInvalidPressure when s names
// none.
func parseName[T ~uint8](names []string, s string) (T, error) {
	for v := 1; v < len(names); v++ {
		if names[v] == s {
			return T(v), nil
		}
	}
	return 0, ErrInvalidPressure
}

// unmarshalName sets *v to the value named text; any other text returns
// ErrInvalidPressure and leaves *v unchanged.
func unmarshalName[T ~uint8](names []string, text []byte, v *T) error {
	parsed, err := parseName[T](names, string(text))
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

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
//
// Every admission validates every member's pressure twice (admission checks
// its inputs, Rank its candidates), so the rules are applied once, to the 36
// combinations of class and states, and Validate is a table lookup.
func (p Pressure) Validate() error {
	if p.Freshness > FreshnessUnknown || p.RequestState > SignalInvalid || p.KVState > SignalInvalid {
		return ErrInvalidPressure
	}
	if limit := ppmLimits[p.Freshness][p.RequestState][p.KVState]; p.PPM < 0 || p.PPM > limit {
		return ErrInvalidPressure
	}
	return nil
}

// ppmLimits[f][r][k] is the largest PPM a pressure of class f with request
// signal state r and KV signal state k may carry: 0 when it must carry none,
// and -1 when no valid pressure has that combination (including the zero
// value of each field, which is outside its set).
var ppmLimits = func() (limits [FreshnessUnknown + 1][SignalInvalid + 1][SignalInvalid + 1]int64) {
	for f := range limits {
		for r := range limits[f] {
			for k := range limits[f][r] {
				limits[f][r][k] = ppmLimit(Freshness(f), SignalState(r), SignalState(k))
			}
		}
	}
	return limits
}()

// ppmLimit applies the rules of Validate to one combination of class and
// signal states; see ppmLimits.
func ppmLimit(f Freshness, r, k SignalState) int64 {
	if !f.Valid() || !r.Valid() || !k.Valid() {
		return -1
	}
	usable := r != SignalInvalid && k != SignalInvalid && (r == SignalValid || k == SignalValid)
	switch {
	case f == FreshnessFresh && !usable, f == FreshnessStale && !usable:
		return -1
	case f == FreshnessFresh && r == SignalValid:
		return MaxRequestPPM
	case f == FreshnessFresh:
		return MaxKVPPM
	default:
		return 0
	}
}
