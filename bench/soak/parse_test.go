package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/procstat"
)

func TestParseGoroutines(t *testing.T) {
	n, err := parseGoroutines([]byte("# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 17\n"))
	if err != nil || n != 17 {
		t.Fatalf("parseGoroutines = %d, %v", n, err)
	}
	for _, bad := range []string{"", "go_goroutines{\n", "# TYPE other gauge\nother 1\n"} {
		if _, err := parseGoroutines([]byte(bad)); !errors.Is(err, errResources) {
			t.Errorf("parseGoroutines(%q) = %v, want errResources", bad, err)
		}
	}
}

func TestProcessResources(t *testing.T) {
	fds, err := processFDs(os.Getpid())
	if err != nil || fds < 3 {
		t.Fatalf("processFDs = %d, %v", fds, err)
	}
	mem, err := procstat.Read(os.Getpid())
	if err != nil || mem.RSSKiB <= 0 {
		t.Fatalf("procstat.Read = %+v, %v", mem, err)
	}
}

func TestParseEngineLog(t *testing.T) {
	recs, err := parseEngineLog([]byte(`{"id":"a","t":1,"live":1,"endpoint":"chat_completions"}` + "\n" +
		`{"id":"b","t":2,"live":2,"endpoint":"completions"}` + "\n" + `{"id":"c","t":`))
	if err != nil || len(recs) != 2 || recs[1].ID != "b" || recs[1].Live != 2 {
		t.Fatalf("parseEngineLog = %+v, %v (a cut last line is skipped)", recs, err)
	}
	if _, err := parseEngineLog([]byte("garbage\n{\"id\":\"a\"}\n")); !errors.Is(err, errResources) {
		t.Fatalf("an invalid line in the middle: %v", err)
	}
	recs, err = readEngineLog(filepath.Join(t.TempDir(), "absent.jsonl"))
	if err != nil || recs != nil {
		t.Fatalf("an engine that never started has no log: %v %v", recs, err)
	}
}

func TestManifest(t *testing.T) {
	c := tierConfig{Strategy: "Capacity", Members: []memberConfig{{"gpu0", 4}, {"gpu1", 2}},
		QuiesceMembers: map[string]bool{"gpu1": true}}
	addrs := map[string]string{"gpu0": "127.0.0.1:1", "gpu1": "127.0.0.1:2"}
	raw, err := manifest(c, addrs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"strategy: Capacity", "http://127.0.0.1:2", "maxConcurrency: 2", "gpu1: soak", "idleTimeout: 1s"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("manifest lacks %q:\n%s", want, raw)
		}
	}
	c.Queue = true
	queued, err := manifest(c, addrs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"maxRequests: 16", "maxWait: 1s"} {
		if !bytes.Contains(queued, []byte(want)) || bytes.Contains(raw, []byte(want)) {
			t.Errorf("%q is not exactly in the manifest with a queue:\n%s", want, queued)
		}
	}
	c.Queue = false
	dir := t.TempDir()
	for _, tc := range []struct {
		desc string
		c    tierConfig
	}{
		{"no engine for a member", tierConfig{Strategy: "RoundRobin", Members: []memberConfig{{"gpu9", 4}}}},
		{"invalid strategy", tierConfig{Strategy: "Random", Members: []memberConfig{{"gpu0", 4}, {"gpu1", 4}}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := writeManifest(dir, tc.c, addrs); !errors.Is(err, errBadTierConfig) {
				t.Fatalf("writeManifest = %v, want errBadTierConfig", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("a rejected configuration wrote %d files", len(entries))
			}
		})
	}
	if err := writeManifest(dir, c, addrs); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != manifestFile {
		t.Fatalf("directory after a write: %v", entries)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--duration", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.minRequests != referenceRequests/6 || o.minFaults != 3 {
		t.Fatalf("a 30 s run scales the thresholds to %d requests and %d faults", o.minRequests, o.minFaults)
	}
	if o, _ := parseFlags(nil, io.Discard); o.duration != 3*time.Minute || o.minRequests != referenceRequests ||
		o.minFaults != referenceFaults || o.killExcessMax != -1 {
		t.Fatalf("defaults %+v", o)
	}
	for _, bad := range [][]string{
		{"--duration", "0s"}, {"--engines", "2"}, {"--workers", "0"}, {"--p-reset", "1.5"},
		{"--p-reset", "0.6", "--p-truncate", "0.6"}, {"--p-hostile", "-0.1"}, {"--fd-slack", "-1"}, {"--kill-downtime", "-1s"},
		{"extra"}, {"--no-such-flag"},
	} {
		var stderr bytes.Buffer
		if _, err := parseFlags(bad, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("parseFlags(%v) = %v, want errUsage", bad, err)
		}
	}
	if code := run([]string{"--engines", "1"}, io.Discard, io.Discard); code != exitUsage {
		t.Fatalf("run with bad flags = %d, want %d", code, exitUsage)
	}
}

func TestApplied(t *testing.T) {
	four, two := int32(4), int32(2)
	c := tierConfig{Strategy: "RoundRobin", Members: []memberConfig{{"gpu0", 4}, {"gpu1", 2}},
		QuiesceMembers: map[string]bool{"gpu1": true}}
	view := func(mutate func(*adminapi.TierView)) adminapi.TierView {
		v := adminapi.TierView{Served: true, Strategy: "RoundRobin",
			Members: []adminapi.MemberView{{ID: "gpu0", MaxConcurrency: &four}, {ID: "gpu1", MaxConcurrency: &two}},
			Quiesce: adminapi.QuiesceView{Members: map[string]string{"gpu1": "soak"}}}
		if mutate != nil {
			mutate(&v)
		}
		return v
	}
	for _, tc := range []struct {
		desc string
		v    adminapi.TierView
		want bool
	}{
		{"applied", view(nil), true},
		{"old strategy", view(func(v *adminapi.TierView) { v.Strategy = "Capacity" }), false},
		{"old ceiling", view(func(v *adminapi.TierView) { v.Members[1].MaxConcurrency = &four }), false},
		{"member missing", view(func(v *adminapi.TierView) { v.Members = v.Members[:1] }), false},
		{"not quiesced yet", view(func(v *adminapi.TierView) { v.Quiesce.Members = nil }), false},
		{"tier quiesced", view(func(v *adminapi.TierView) { v.Quiesce.Tier = "soak" }), false},
		{"source error", view(func(v *adminapi.TierView) { v.SourceError = "bad" }), false},
		{"not served", view(func(v *adminapi.TierView) { v.Served = false }), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if ok, why := applied(tc.v, c); ok != tc.want {
				t.Fatalf("applied = %v (%s), want %v", ok, why, tc.want)
			}
		})
	}
}
