//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Scenario 0 (admission core) constants: the Go benchmarks of
// internal/admission that the admission core's targets are about
// (docs/BENCHMARKS.md#targets).
const (
	// coreCount is go test's -count: medians of five runs.
	coreCount = 5
	// coreBenchtime is go test's -benchtime per run; millions of
	// iterations of a microsecond operation.
	coreBenchtime = "300ms"
	// benchCapacity16 is the single-thread Acquire+Release of a 16-member
	// Capacity tier.
	benchCapacity16 = "BenchmarkAcquireRelease/strategy=Capacity/members=16"
	// benchTiers1 and benchTiers64 spread decisions over 1 and 64 Capacity
	// tiers of 4 members (4 and 256 members in all).
	benchTiers1 = "BenchmarkAcquireReleaseTiers/tiers=1"
	// benchTiers64 is the 64-tier case.
	benchTiers64 = "BenchmarkAcquireReleaseTiers/tiers=64"
	// sameCostTolerance is how much more a decision among 64 tiers may
	// cost than among one and still count as "the same" (the target names no
	// number; run-to-run noise on this machine is about this large).
	sameCostTolerance = 1.25
)

// errGoBench reports go test -bench output without a needed benchmark.
var errGoBench = errors.New("harness: unexpected go test -bench output")

// goBenchLine is one result line of `go test -bench -benchmem`.
type goBenchLine struct {
	// Name is the benchmark name without the -GOMAXPROCS suffix.
	Name string
	// NsPerOp, BytesPerOp and AllocsPerOp are the reported figures.
	NsPerOp float64
	// BytesPerOp is B/op.
	BytesPerOp float64
	// AllocsPerOp is allocs/op.
	AllocsPerOp float64
}

var goBenchRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parseGoBench reads the result lines of `go test -bench -benchmem`.
func parseGoBench(out string) ([]goBenchLine, error) {
	var lines []goBenchLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := goBenchRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		l := goBenchLine{Name: m[1], NsPerOp: -1, BytesPerOp: -1, AllocsPerOp: -1}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %q", errGoBench, sc.Text())
			}
			switch f[i+1] {
			case "ns/op":
				l.NsPerOp = v
			case "B/op":
				l.BytesPerOp = v
			case "allocs/op":
				l.AllocsPerOp = v
			}
		}
		if l.NsPerOp < 0 || l.AllocsPerOp < 0 {
			return nil, fmt.Errorf("%w: no ns/op or allocs/op (run with -benchmem): %q", errGoBench, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// coreRow is the medians of one benchmark.
type coreRow struct {
	// Name is the benchmark.
	Name string `json:"name"`
	// Runs is the number of results.
	Runs int `json:"runs"`
	// NsPerOp is the median ns/op.
	NsPerOp float64 `json:"ns_per_op"`
	// AllocsPerOp is the median allocs/op.
	AllocsPerOp float64 `json:"allocs_per_op"`
	// BytesPerOp is the median B/op.
	BytesPerOp float64 `json:"bytes_per_op"`
}

// coreResult is scenario 0's measurements.
type coreResult struct {
	// Command is the go test command line.
	Command string `json:"command"`
	// Rows has the medians of every benchmark that ran.
	Rows []coreRow `json:"rows"`
	// Capacity16 is the 16-member Capacity row.
	Capacity16 coreRow `json:"capacity16"`
	// Tiers1 and Tiers64 are the 1- and 64-tier rows.
	Tiers1 coreRow `json:"tiers1"`
	// Tiers64 is the 64-tier row.
	Tiers64 coreRow `json:"tiers64"`
	// Tiers64VsTiers1 is the ratio of their ns/op medians.
	Tiers64VsTiers1 float64 `json:"tiers64_vs_tiers1"`
}

// summarizeCore takes the medians per benchmark and picks the rows the
// targets judge (docs/BENCHMARKS.md#targets); a missing one is an error.
func summarizeCore(lines []goBenchLine) (coreResult, error) {
	var res coreResult
	byName := map[string][]goBenchLine{}
	var order []string
	for _, l := range lines {
		if _, ok := byName[l.Name]; !ok {
			order = append(order, l.Name)
		}
		byName[l.Name] = append(byName[l.Name], l)
	}
	rows := map[string]coreRow{}
	for _, name := range order {
		ls := byName[name]
		row := coreRow{Name: name, Runs: len(ls)}
		var err error
		if row.NsPerOp, err = medianOf(ls, func(l goBenchLine) float64 { return l.NsPerOp }); err != nil {
			return res, err
		}
		if row.AllocsPerOp, err = medianOf(ls, func(l goBenchLine) float64 { return l.AllocsPerOp }); err != nil {
			return res, err
		}
		if row.BytesPerOp, err = medianOf(ls, func(l goBenchLine) float64 { return l.BytesPerOp }); err != nil {
			return res, err
		}
		rows[name] = row
		res.Rows = append(res.Rows, row)
	}
	for _, pick := range []struct {
		dst  *coreRow
		name string
	}{{&res.Capacity16, benchCapacity16}, {&res.Tiers1, benchTiers1}, {&res.Tiers64, benchTiers64}} {
		row, ok := rows[pick.name]
		if !ok {
			return res, fmt.Errorf("%w: no %s result", errGoBench, pick.name)
		}
		*pick.dst = row
	}
	var err error
	res.Tiers64VsTiers1, err = ratio(res.Tiers64.NsPerOp, res.Tiers1.NsPerOp)
	return res, err
}

// runCore runs the admission benchmarks.
func runCore(env *runEnv) (*coreResult, error) {
	args := []string{"test", "-run", "^$", "-bench", "^BenchmarkAcquireRelease(Tiers)?$", "-benchmem",
		"-count", strconv.Itoa(coreCount), "-benchtime", coreBenchtime, "-cpu", "1", "./internal/admission"}
	env.progress("admission core: go %s", strings.Join(args, " "))
	out, err := env.sup.runToolIn(env.sup.ctx, env.opts.repo, "core-go-test", "go", args...)
	if err != nil {
		return nil, err
	}
	lines, err := parseGoBench(out)
	if err != nil {
		return nil, err
	}
	res, err := summarizeCore(lines)
	if err != nil {
		return nil, err
	}
	res.Command = "go " + strings.Join(args, " ")
	return &res, nil
}
