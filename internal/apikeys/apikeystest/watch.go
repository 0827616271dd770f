package apikeystest

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/apikeys"
)

// FailSafe bounds every wait on an event; it is a deadline for a broken
// test, never a pace.
const FailSafe = 20 * time.Second

// reportBuffer holds the reports of the reads a test has not looked at
// yet; a test looks after every step or two.
const reportBuffer = 16

// Watch runs an apikeys.Watch on a fake clock and steps it one read at a
// time.
type Watch struct {
	t       testing.TB
	clock   *clocktesting.FakeClock
	polled  chan struct{}
	reports chan apikeys.Reload
	stopped chan error
}

// StartWatch runs a Watch of the file path into k until the test ends,
// and fails the test when Run returns an error or does not stop with its
// context.
func StartWatch(t testing.TB, path string, k *apikeys.Keys) *Watch {
	t.Helper()
	h := &Watch{t: t, clock: clocktesting.NewFakeClock(time.Now()), polled: make(chan struct{}),
		reports: make(chan apikeys.Reload, reportBuffer), stopped: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	w := apikeys.Watch{Path: path, Keys: k, Clock: h.clock,
		Report: func(r apikeys.Reload) { h.reports <- r },
		Polled: func() { h.polled <- struct{}{} }}
	go func() { h.stopped <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.stopped:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(FailSafe):
			t.Error("the key watch did not stop with its context")
		}
	})
	return h
}

// Step lets one interval pass and waits for the read it triggers. The
// ticker is created by Run's goroutine, so the first step waits for it.
func (h *Watch) Step() {
	h.t.Helper()
	deadline := time.Now().Add(FailSafe)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the key watch never started its ticker")
		}
		runtime.Gosched()
	}
	h.clock.Step(apikeys.DefaultPollInterval)
	select {
	case <-h.polled:
	case <-time.After(FailSafe):
		h.t.Fatal("no read after an interval")
	}
}

// Report returns the next report, or fails the test when there is none.
func (h *Watch) Report() apikeys.Reload {
	h.t.Helper()
	select {
	case r := <-h.reports:
		return r
	default:
		h.t.Fatal("no report")
		return apikeys.Reload{}
	}
}

// NoReport fails the test when a report is pending.
func (h *Watch) NoReport() {
	h.t.Helper()
	select {
	case r := <-h.reports:
		h.t.Fatalf("unexpected report %+v", r)
	default:
	}
}

// Allows reports whether k allows a request presenting key.
func Allows(k *apikeys.Keys, key string) bool {
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer "+key)
	return k.Allow(r)
}
