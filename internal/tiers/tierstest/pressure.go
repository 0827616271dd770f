package tierstest

import (
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// Pressure is a tiers.PressureView that the test controls. Its zero value
// knows no tier. It is safe for concurrent use.
type Pressure struct {
	// Snapshots counts the calls of Snapshot (the request path's reads).
	Snapshots atomic.Int64
	// Peeks counts the calls of Peek (the admin API's reads).
	Peeks atomic.Int64

	pressure byTier[scheduler.Pressure]
}

// Snapshot returns the tier's member pressures as Set left them, or
// ErrUnknownTier, and counts the call.
func (f *Pressure) Snapshot(tier string) (map[string]scheduler.Pressure, error) {
	f.Snapshots.Add(1)
	return f.pressure.get(tier)
}

// Peek returns what Snapshot returns and counts the call.
func (f *Pressure) Peek(tier string) (map[string]scheduler.Pressure, error) {
	f.Peeks.Add(1)
	return f.pressure.get(tier)
}

// Set replaces the tier's member pressures with a copy of p.
func (f *Pressure) Set(tier string, p map[string]scheduler.Pressure) {
	f.pressure.set(tier, p)
}

// Fresh is a fresh pressure of ppm from a valid request signal, without a
// KV-cache signal.
func Fresh(ppm int64) scheduler.Pressure {
	return scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: ppm, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
}
