//go:build linux

package main

import (
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

func TestAreaOf(t *testing.T) {
	for _, tc := range []struct {
		stack []string // innermost first
		want  string
	}{
		{[]string{"syscall.Syscall6", "internal/poll.(*FD).Write", "net/http.(*response).finishRequest"}, "system calls (read, write, epoll)"},
		{[]string{"runtime.memmove", "github.com/sluice-dev/sluice/internal/router.modelField", "github.com/sluice-dev/sluice/internal/router.(*Router).ServeHTTP"}, "request body (read, model scan, rewrite)"},
		{[]string{"runtime.mallocgc", "github.com/sluice-dev/sluice/internal/evidence.(*Log).Add"}, "allocation"},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, "GC"},
		{[]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "runtime.gcAssistAlloc"}, "GC"},
		{[]string{"github.com/sluice-dev/sluice/internal/admission.(*Tier).Acquire", "github.com/sluice-dev/sluice/internal/router.(*Router).serveInference"}, "admission and ranking"},
		{[]string{"net/textproto.canonicalMIMEHeaderKey", "net/http.readRequest"}, "server: request read and parse"},
		{[]string{"runtime.futex", "runtime.notesleep"}, "Go runtime (other)"},
	} {
		if got := areaOf(tc.stack); got != tc.want {
			t.Errorf("areaOf(%q) = %q, want %q", tc.stack, got, tc.want)
		}
	}
}

// stackProfile builds a profile of one sample per stack (function names,
// innermost first), of the given type and value after a count of 1.
func stackProfile(typ, unit string, stacks [][]string, values []int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: typ, Unit: unit}}}
	locs := map[string]*profile.Location{}
	for i, stack := range stacks {
		s := &profile.Sample{Value: []int64{1, values[i]}}
		for _, name := range stack {
			loc, ok := locs[name]
			if !ok {
				f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
				p.Function = append(p.Function, f)
				loc = &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
				p.Location = append(p.Location, loc)
				locs[name] = loc
			}
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

// cpuProfile builds a CPU profile whose samples are the given stacks
// (innermost first) with the given nanoseconds.
func cpuProfile(samples map[string][]string, ns map[string]int64) *profile.Profile {
	var stacks [][]string
	var values []int64
	for key, stack := range samples {
		stacks, values = append(stacks, stack), append(values, ns[key])
	}
	return stackProfile("cpu", "nanoseconds", stacks, values)
}

func TestBreakdown(t *testing.T) {
	p := cpuProfile(map[string][]string{
		"write": {"syscall.Syscall6", "internal/poll.(*FD).Write"},
		"gc":    {"runtime.scanobject", "runtime.gcBgMarkWorker"},
		"admit": {"github.com/sluice-dev/sluice/internal/admission.(*Tier).Acquire"},
	}, map[string]int64{"write": 6e8, "gc": 3e8, "admit": 1e8})
	cpu, areas, err := breakdown(p, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if cpu != 1 || len(areas) != 3 {
		t.Fatalf("cpu %v s, areas %+v", cpu, areas)
	}
	want := []profileArea{
		{"system calls (read, write, epoll)", 0.6, 600},
		{"GC", 0.3, 300},
		{"admission and ranking", 0.1, 100},
	}
	for i, w := range want {
		a := areas[i]
		if a.Area != w.Area || math.Abs(a.Share-w.Share) > 1e-9 || math.Abs(a.USPerRequest-w.USPerRequest) > 1e-9 {
			t.Errorf("area %d = %+v, want %+v", i, a, w)
		}
	}
	if _, _, err := breakdown(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}, 1); err == nil {
		t.Error("a profile without CPU samples was broken down")
	}
	if _, _, err := breakdown(cpuProfile(nil, nil), 1); err == nil {
		t.Error("an empty profile was broken down")
	}
}
