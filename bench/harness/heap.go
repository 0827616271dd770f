//go:build linux

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// heapTopSites is how many allocation sites a heap snapshot keeps.
const heapTopSites = 10

// heapSnapshot is the router's memory at the peak of a streams phase, from
// its heap profile: what the Go runtime holds, and where the live heap was
// allocated.
type heapSnapshot struct {
	// File is the heap profile's file name in the results directory.
	File string `json:"file"`
	// HeapAllocMiB is the live heap plus the garbage not yet collected;
	// HeapInuseMiB the heap's spans in use.
	HeapAllocMiB float64 `json:"heap_alloc_mib"`
	// HeapInuseMiB is the heap's spans in use.
	HeapInuseMiB float64 `json:"heap_inuse_mib"`
	// StackInuseMiB is the goroutine stacks.
	StackInuseMiB float64 `json:"stack_inuse_mib"`
	// NextGCMiB is the heap size at which the next collection starts.
	NextGCMiB float64 `json:"next_gc_mib"`
	// SysMiB is all the memory the runtime obtained from the kernel.
	SysMiB float64 `json:"sys_mib"`
	// LiveMiB is the heap that was live at the last collection, the
	// profile's in-use space.
	LiveMiB float64 `json:"live_mib"`
	// Sites are the largest allocation sites of the live heap.
	Sites []heapSite `json:"sites"`
}

// heapSite is the live heap allocated by one function.
type heapSite struct {
	// Function is the innermost function outside the Go runtime that
	// allocated.
	Function string `json:"function"`
	// MiB is its in-use space.
	MiB float64 `json:"mib"`
}

// snapshotHeap records the router's heap profile and memory statistics,
// writes the profile to the results directory as file and summarizes both.
func snapshotHeap(env *runEnv, rt *routerProc, file string) (*heapSnapshot, error) {
	ctx := env.sup.ctx
	// gc=1: the profile is of the heap live now, not at the last
	// collection, which may have run before the streams opened.
	bin, err := fetchProfile(ctx, "http://"+rt.admin+"/debug/pprof/heap?gc=1", 0)
	if err != nil {
		return nil, err
	}
	text, err := fetchProfile(ctx, "http://"+rt.admin+"/debug/pprof/heap?debug=1", 0)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(env.opts.out, file), bin, 0o600); err != nil {
		return nil, err
	}
	p, err := profile.Parse(bytes.NewReader(bin))
	if err != nil {
		return nil, err
	}
	s := &heapSnapshot{File: file}
	if s.LiveMiB, s.Sites, err = heapSites(p); err != nil {
		return nil, err
	}
	stats, err := memStats(text)
	if err != nil {
		return nil, err
	}
	for name, dst := range map[string]*float64{"HeapAlloc": &s.HeapAllocMiB, "HeapInuse": &s.HeapInuseMiB,
		"StackInuse": &s.StackInuseMiB, "NextGC": &s.NextGCMiB, "Sys": &s.SysMiB} {
		v, ok := stats[name]
		if !ok {
			return nil, fmt.Errorf("heap profile: no %s in the runtime statistics", name)
		}
		*dst = float64(v) / (1 << 20)
	}
	return s, nil
}

// memStats reads the runtime.MemStats lines ("# Name = value") of a text
// heap profile.
func memStats(text []byte) (map[string]uint64, error) {
	stats := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || strings.ContainsAny(name, " []") {
			continue
		}
		// "# Stack = inuse / sys" and the like: the first value is in use.
		if name == "Stack" {
			name = "StackInuse"
		}
		value, _, _ = strings.Cut(value, " / ")
		if v, err := strconv.ParseUint(value, 10, 64); err == nil {
			stats[name] = v
		}
	}
	return stats, sc.Err()
}

// heapSites sums a heap profile's in-use space by the innermost function
// outside the Go runtime, and returns the total and the largest sites.
func heapSites(p *profile.Profile) (liveMiB float64, sites []heapSite, err error) {
	by, total, err := sumBy(p, "inuse_space", "bytes", allocationSite)
	if err != nil {
		return 0, nil, err
	}
	for fn, v := range by {
		sites = append(sites, heapSite{Function: fn, MiB: float64(v) / (1 << 20)})
	}
	slices.SortFunc(sites, func(a, b heapSite) int {
		return cmp.Or(cmp.Compare(b.MiB, a.MiB), strings.Compare(a.Function, b.Function))
	})
	return float64(total) / (1 << 20), sites[:min(len(sites), heapTopSites)], nil
}

// allocationSite returns a stack's innermost function outside the Go
// runtime, or "Go runtime".
func allocationSite(stack []string) string {
	for _, fn := range stack {
		if !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") {
			return fn
		}
	}
	return "Go runtime"
}

// heapSitesText lists the first n sites as "function (MiB)".
func heapSitesText(sites []heapSite, n int) string {
	var parts []string
	for _, s := range sites[:min(n, len(sites))] {
		parts = append(parts, fmt.Sprintf("`%s` %.1f MiB", s.Function, s.MiB))
	}
	return strings.Join(parts, ", ")
}
