//go:build linux

package main

import (
	"errors"
	"testing"
)

// goBenchSample is `go test -bench -benchmem -count 2 -cpu 1` output.
const goBenchSample = `goos: linux
goarch: amd64
pkg: github.com/sluice-dev/sluice/internal/admission
cpu: AMD EPYC
BenchmarkAcquireRelease/strategy=Capacity/members=16         	 1000000	       900.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkAcquireRelease/strategy=Capacity/members=16         	 1000000	      1100 ns/op	       0 B/op	       0 allocs/op
BenchmarkAcquireReleaseTiers/tiers=1-2                       	 3000000	       400.5 ns/op	      16 B/op	       1 allocs/op
BenchmarkAcquireReleaseTiers/tiers=1-2                       	 3000000	       399.5 ns/op	      16 B/op	       1 allocs/op
BenchmarkAcquireReleaseTiers/tiers=64-2                      	 3000000	       600 ns/op	      16 B/op	       1 allocs/op
BenchmarkAcquireReleaseTiers/tiers=64-2                      	 3000000	       400 ns/op	      16 B/op	       1 allocs/op
PASS
ok  	github.com/sluice-dev/sluice/internal/admission	12.3s
`

func TestParseGoBench(t *testing.T) {
	lines, err := parseGoBench(goBenchSample)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 6 || lines[2].Name != benchTiers1 || lines[2].NsPerOp != 400.5 || lines[2].AllocsPerOp != 1 || lines[2].BytesPerOp != 16 {
		t.Fatalf("lines = %+v", lines)
	}
	res, err := summarizeCore(lines)
	if err != nil {
		t.Fatal(err)
	}
	if res.Capacity16.NsPerOp != 1000 || res.Capacity16.Runs != 2 || res.Tiers1.NsPerOp != 400 || res.Tiers64.NsPerOp != 500 || res.Tiers64VsTiers1 != 1.25 {
		t.Fatalf("summary = %+v", res)
	}

	if _, err := parseGoBench("BenchmarkX 100 12 ns/op\n"); !errors.Is(err, errGoBench) {
		t.Fatalf("missing allocs/op: %v", err)
	}
	if _, err := summarizeCore(lines[:2]); !errors.Is(err, errGoBench) {
		t.Fatalf("missing tiers benchmarks: %v", err)
	}
}
