package adminserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// fakeReadiness is a ReadinessView the test controls.
type fakeReadiness struct {
	mu       sync.Mutex
	tiers    map[string]map[string]bool
	rechecks map[string]int // "tier#member" → Recheck calls.
}

var errFakeUnknownTier = errors.New("fake: unknown tier")

// fakePressure is a PressureView the test controls; it counts the two
// kinds of reads.
type fakePressure struct {
	mu        sync.Mutex
	tiers     map[string]map[string]scheduler.Pressure
	snapshots atomic.Int64
	peeks     atomic.Int64
}

// fresh is a fresh pressure of ppm.
func fresh(ppm int64) scheduler.Pressure {
	return scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: ppm, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
}

// errorCode decodes an OpenAI error body's code, failing on any other shape.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil || e.Error.Code == nil {
		t.Fatalf("body %q is not an OpenAI error object (%v)", body, err)
	}
	return *e.Error.Code
}

// Recheck marks the member not ready, as readiness.Cache does until a probe
// passes, and counts the call.
func (f *fakeReadiness) Recheck(tier, member string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rechecks == nil {
		f.rechecks = map[string]int{}
	}
	f.rechecks[tier+"#"+member]++
	if m, ok := f.tiers[tier]; ok {
		if _, known := m[member]; known {
			m[member] = false
		}
	}
}

func (f *fakeReadiness) Ready(tier string) (map[string]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.tiers[tier]
	if !ok {
		return nil, errFakeUnknownTier
	}
	return maps.Clone(m), nil
}

// reconfigure registers tiers as readiness.Cache.Reconfigure would, with
// every member ready.
func (f *fakeReadiness) reconfigure(tiers []readiness.Tier) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tiers = map[string]map[string]bool{}
	for _, t := range tiers {
		m := map[string]bool{}
		for _, mb := range t.Members {
			m[mb.ID] = true
		}
		f.tiers[t.Key] = m
	}
}

func (f *fakePressure) Snapshot(tier string) (map[string]scheduler.Pressure, error) {
	f.snapshots.Add(1)
	return f.read(tier)
}

func (f *fakePressure) Peek(tier string) (map[string]scheduler.Pressure, error) {
	f.peeks.Add(1)
	return f.read(tier)
}

func (f *fakePressure) read(tier string) (map[string]scheduler.Pressure, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.tiers[tier]
	if !ok {
		return nil, errFakeUnknownTier
	}
	return maps.Clone(m), nil
}

func (f *fakePressure) set(tier string, p map[string]scheduler.Pressure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tiers == nil {
		f.tiers = map[string]map[string]scheduler.Pressure{}
	}
	f.tiers[tier] = maps.Clone(p)
}

// recorder is a minimal http.ResponseWriter for calling handlers directly.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) { r.status = status }

func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
