package tiers

import (
	"maps"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestApplied proves Applied reports the generation and members in force,
// not the latest snapshot's: a configuration that fails to apply leaves the
// previous generation in force and is named with its generation, a tier
// whose first configuration fails has generation zero, and the next good
// configuration clears the error.
func TestApplied(t *testing.T) {
	set := New(Options{})
	good := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:1"}, {ID: "gpu1", Endpoint: "http://127.0.0.1:2"}})
	good.Generation = 4
	set.Apply(sourcetest.Snapshot(good))
	if got := set.Applied(); len(got) != 1 || got[0].Generation != 4 || got[0].ApplyError != "" ||
		strings.Join(got[0].Members, ",") != "gpu0,gpu1" || got[0].Namespace != "ns" || got[0].Name != "llama" {
		t.Fatalf("Applied = %+v", got)
	}

	broken := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "ftp://nowhere"}})
	broken.Generation = 5
	fresh := sourcetest.Tier("ns/fresh", []string{"fresh"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "::"}})
	fresh.Generation = 1
	set.Apply(sourcetest.Snapshot(broken, fresh))
	got := set.Applied()
	if len(got) != 2 || got[0].Key != "ns/fresh" || got[1].Key != "ns/llama" {
		t.Fatalf("Applied = %+v, want fresh and llama", got)
	}
	if f := got[0]; f.Generation != 0 || len(f.Members) != 0 || f.FailedGeneration != 1 || f.ApplyError == "" ||
		f.Namespace != "ns" || f.Name != "fresh" {
		t.Fatalf("never applied tier = %+v", f)
	}
	l := got[1]
	if l.Generation != 4 || strings.Join(l.Members, ",") != "gpu0,gpu1" || l.FailedGeneration != 5 ||
		!strings.Contains(l.ApplyError, "member gpu0") || strings.Contains(l.ApplyError, "ftp") {
		t.Fatalf("tier whose update failed = %+v, want generation 4 in force and generation 5 failed", l)
	}
	if strings.Count(l.ApplyError, ErrInvalidTier.Error()) != 1 {
		t.Fatalf("apply error %q names %q more than once", l.ApplyError, ErrInvalidTier.Error())
	}

	good.Generation = 6
	set.Apply(sourcetest.Snapshot(good))
	if got := set.Applied(); len(got) != 1 || got[0].Generation != 6 || got[0].ApplyError != "" || got[0].FailedGeneration != 0 {
		t.Fatalf("Applied after a good generation = %+v", got)
	}
}

// TestRetain proves Apply hands Options.Retain the endpoint addresses of
// the members of the tiers it serves, once per snapshot: a member of a
// tier that left the configuration, or of a refused new tier, is not
// among them.
func TestRetain(t *testing.T) {
	var got []map[string]bool
	set := New(Options{Retain: func(addrs map[string]bool) { got = append(got, addrs) }})
	llama := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8001"}, {ID: "gpu1", Endpoint: "http://127.0.0.1:8002/v1"}})
	embed := sourcetest.Tier("ns/embed", []string{"embed"}, "", []sourcetest.Member{{ID: "cpu0", Endpoint: "https://localhost"}})
	refused := sourcetest.Tier("ns/refused", []string{"refused"}, "", []sourcetest.Member{{ID: "gpu9", Endpoint: "ftp://127.0.0.1:9"}})
	set.Apply(sourcetest.Snapshot(llama, embed))
	set.Apply(sourcetest.Snapshot(llama, refused))
	want := []map[string]bool{
		{"127.0.0.1:8001": true, "127.0.0.1:8002": true, "localhost:443": true},
		{"127.0.0.1:8001": true, "127.0.0.1:8002": true},
	}
	if len(got) != len(want) {
		t.Fatalf("Retain called %d times, want %d", len(got), len(want))
	}
	for i := range want {
		if !maps.Equal(got[i], want[i]) {
			t.Errorf("snapshot %d retained %v, want %v", i, got[i], want[i])
		}
	}
}
