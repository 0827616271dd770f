//go:build linux

package main

import (
	"testing"

	"github.com/google/pprof/profile"
)

func TestMemStats(t *testing.T) {
	text := []byte(`heap profile: 3: 4096 [9: 9000] @ heap/1048576
1: 4096 [1: 4096] @ 0x1 0x2
#	0x1	main.f+0x1	/x.go:1

# runtime.MemStats
# Alloc = 3214624
# HeapAlloc = 3214624
# Sys = 17930504
# HeapInuse = 4694016
# Stack = 524288 / 524288
# MSpan = 65600 / 81600
# NextGC = 6671058
# PauseNs = [0 0 0]
# DebugGC = false
`)
	got, err := memStats(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"Alloc": 3214624, "HeapAlloc": 3214624, "Sys": 17930504, "HeapInuse": 4694016,
		"StackInuse": 524288, "MSpan": 65600, "NextGC": 6671058}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	for _, k := range []string{"PauseNs", "DebugGC"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s read as a number", k)
		}
	}
}

func TestHeapSites(t *testing.T) {
	const copyGet = "github.com/sluice-dev/sluice/internal/router.copyBuffers.Get"
	p := stackProfile("inuse_space", "bytes", [][]string{
		{"runtime.mallocgc", "bufio.NewReaderSize", "net/http.(*conn).serve"},
		{"runtime.makeslice", copyGet},
		{copyGet, "net/http/httputil.(*ReverseProxy).copyResponse"},
		{"runtime.malg", "internal/runtime/maps.newTable"},
	}, []int64{3 << 20, 1 << 20, 1 << 20, 1 << 19})
	live, sites, err := heapSites(p)
	if err != nil {
		t.Fatal(err)
	}
	if live != 5.5 {
		t.Errorf("live = %v MiB, want 5.5", live)
	}
	want := []heapSite{{"bufio.NewReaderSize", 3}, {copyGet, 2}, {"Go runtime", 0.5}}
	if len(sites) != len(want) {
		t.Fatalf("sites = %+v, want %+v", sites, want)
	}
	for i := range want {
		if sites[i] != want[i] {
			t.Errorf("site %d = %+v, want %+v", i, sites[i], want[i])
		}
	}
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}
	if _, _, err := heapSites(p); err == nil {
		t.Error("a profile without inuse_space was summed")
	}
}
