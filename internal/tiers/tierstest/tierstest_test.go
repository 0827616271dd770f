package tierstest

import (
	"errors"
	"maps"
	"testing"

	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// TestReadiness: Reconfigure makes every member ready, Recheck marks a
// known member not ready and counts, Pass makes it ready again, Set
// replaces a tier, and a tier not set is ErrUnknownTier.
func TestReadiness(t *testing.T) {
	var r Readiness
	if _, err := r.Ready("ns/llama"); !errors.Is(err, ErrUnknownTier) {
		t.Fatalf("Ready of an unknown tier: %v", err)
	}
	r.Reconfigure([]readiness.Tier{{Key: "ns/llama", Members: []readiness.Member{{ID: "gpu0"}, {ID: "gpu1"}}}})
	r.Recheck("ns/llama", "gpu0")
	r.Recheck("ns/llama", "gpu0")
	r.Recheck("ns/llama", "gone")
	if got, _ := r.Ready("ns/llama"); !maps.Equal(got, map[string]bool{"gpu0": false, "gpu1": true}) {
		t.Errorf("after Recheck: %v", got)
	}
	if n := r.RecheckCalls("ns/llama", "gpu0"); n != 2 {
		t.Errorf("RecheckCalls = %d, want 2", n)
	}
	r.Pass("ns/llama", "gpu0")
	if got, _ := r.Ready("ns/llama"); !maps.Equal(got, map[string]bool{"gpu0": true, "gpu1": true}) {
		t.Errorf("after Pass: %v", got)
	}
	r.Set("ns/llama", map[string]bool{"gpu1": false})
	if got, _ := r.Ready("ns/llama"); !maps.Equal(got, map[string]bool{"gpu1": false}) {
		t.Errorf("after Set: %v", got)
	}
}

// TestPressure: Snapshot and Peek return what was set and count apart;
// a tier not set is ErrUnknownTier.
func TestPressure(t *testing.T) {
	var p Pressure
	if _, err := p.Snapshot("ns/llama"); !errors.Is(err, ErrUnknownTier) {
		t.Fatalf("Snapshot of an unknown tier: %v", err)
	}
	set := map[string]scheduler.Pressure{"gpu0": Fresh(1000)}
	p.Set("ns/llama", set)
	set["gpu0"] = Fresh(2)
	got, err := p.Peek("ns/llama")
	if err != nil || got["gpu0"].PPM != 1000 || got["gpu0"].Freshness != scheduler.FreshnessFresh {
		t.Errorf("Peek = %v, %v", got, err)
	}
	if s, k := p.Snapshots.Load(), p.Peeks.Load(); s != 1 || k != 1 {
		t.Errorf("Snapshots, Peeks = %d, %d, want 1, 1", s, k)
	}
}

// TestHostAddrs: Read returns what was set last and counts.
func TestHostAddrs(t *testing.T) {
	var h HostAddrs
	errDown := errors.New("down")
	h.Set(errDown, "192.0.2.10", "::1")
	addrs, err := h.Read()
	if !errors.Is(err, errDown) || len(addrs) != 2 || addrs[1].String() != "::1" {
		t.Errorf("Read = %v, %v", addrs, err)
	}
	if n := h.Reads(); n != 1 {
		t.Errorf("Reads = %d, want 1", n)
	}
}
