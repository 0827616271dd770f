//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// profileFile is the published CPU profile of the router under the
// saturation load, next to results.json.
const profileFile = "router-cpu.pprof"

// profileResult is where the router spent its CPU in one profiled
// saturation run of the Capacity tier.
type profileResult struct {
	// System is the profiled row of the overhead table.
	System string `json:"system"`
	// Seconds is the profile's duration.
	Seconds float64 `json:"seconds"`
	// Requests is what wrk completed during the run.
	Requests int `json:"requests"`
	// CPUSeconds is the CPU time the profile sampled.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Areas is the CPU time by area, largest first.
	Areas []profileArea `json:"areas"`
	// File is the profile's file name in the results directory.
	File string `json:"file"`
}

// profileArea is the CPU time of one area of the request path.
type profileArea struct {
	// Area names it.
	Area string `json:"area"`
	// Share is its part of the sampled CPU time.
	Share float64 `json:"share"`
	// USPerRequest is its CPU time per request, in microseconds.
	USPerRequest float64 `json:"us_per_request"`
}

// areaRule assigns a stack frame to an area: a function whose name has one
// of the prefixes.
type areaRule struct {
	area     string
	prefixes []string
}

// Areas, in the order a frame is matched against them. The collector's
// samples are found first, by gcRoots.
var areaRules = []areaRule{
	{"system calls (read, write, epoll)", []string{"syscall.", "internal/runtime/syscall.", "internal/poll.", "runtime.netpoll"}},
	{"allocation", []string{"runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice", "runtime.makemap", "runtime.mapassign"}},
	{"goroutine scheduling", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.goexit0", "runtime.mcall", "runtime.newproc", "runtime.ready", "runtime.wakep", "runtime.morestack", "runtime.newstack"}},
	{"decision records", []string{"github.com/sluice-dev/sluice/internal/evidence."}},
	{"metrics", []string{"github.com/sluice-dev/sluice/internal/telemetry.", "github.com/prometheus/"}},
	{"logging", []string{"log/slog.", "github.com/go-logr/"}},
	{"admission and ranking", []string{"github.com/sluice-dev/sluice/internal/admission.", "github.com/sluice-dev/sluice/internal/scheduler."}},
	{"pressure and readiness snapshots", []string{"github.com/sluice-dev/sluice/internal/pressure.", "github.com/sluice-dev/sluice/internal/readiness.", "github.com/sluice-dev/sluice/internal/memberpoll."}},
	{"request body (read, model scan, rewrite)", []string{"github.com/sluice-dev/sluice/internal/router.readBody", "github.com/sluice-dev/sluice/internal/router.modelField", "github.com/sluice-dev/sluice/internal/router.rewriteModel", "github.com/sluice-dev/sluice/internal/router.(*bodyBuf)"}},
	{"response body scan (SSE, usage)", []string{"github.com/sluice-dev/sluice/internal/sse."}},
	{"upstream client", []string{"github.com/sluice-dev/sluice/internal/upstream."}},
	{"exchange (headers, relay)", []string{"github.com/sluice-dev/sluice/internal/router.(*exchange)", "github.com/sluice-dev/sluice/internal/router.(*heldReply)", "github.com/sluice-dev/sluice/internal/router.(*Router).copyResponseHeader", "github.com/sluice-dev/sluice/internal/router.dropHopByHop", "github.com/sluice-dev/sluice/internal/router.dropResponseHopByHop"}},
	{"server: request read and parse", []string{"net/http.(*conn).readRequest", "net/http.readRequest", "net/textproto.", "net/url."}},
	{"server: response write", []string{"net/http.(*response)", "net/http.(*chunkWriter)", "net/http.checkConnErrorWriter", "bufio.(*Writer)"}},
	{"router (other)", []string{"github.com/sluice-dev/sluice/"}},
	{"net/http (other)", []string{"net/http.", "net/", "bufio."}},
}

// gcRoots are functions whose presence anywhere on a stack makes the
// sample the collector's.
var gcRoots = []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge"}

// areaOf returns the area of one sample's stack, innermost frame first:
// the collector if it is on the stack, otherwise the first frame, walking
// outwards, that a rule matches; "Go runtime (other)" for a runtime-only
// stack.
func areaOf(stack []string) string {
	for _, fn := range stack {
		if slices.Contains(gcRoots, fn) {
			return "GC"
		}
	}
	for _, fn := range stack {
		for _, r := range areaRules {
			for _, p := range r.prefixes {
				if strings.HasPrefix(fn, p) {
					return r.area
				}
			}
		}
	}
	return "Go runtime (other)"
}

// sumBy sums one sample type (typ, unit) of a profile by key, which is
// handed each sample's stack: its function names, innermost first (a
// location's lines are innermost first too, for inlined calls). The stack
// is reused between samples.
func sumBy(p *profile.Profile, typ, unit string, key func(stack []string) string) (by map[string]int64, total int64, err error) {
	idx := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == typ && st.Unit == unit })
	if idx < 0 {
		return nil, 0, fmt.Errorf("profile: no %s/%s sample type", typ, unit)
	}
	by = map[string]int64{}
	var stack []string
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		by[key(stack)] += s.Value[idx]
		total += s.Value[idx]
	}
	return by, total, nil
}

// breakdown sums a CPU profile's samples by area.
func breakdown(p *profile.Profile, requests int) (cpuSeconds float64, areas []profileArea, err error) {
	byArea, total, err := sumBy(p, "cpu", "nanoseconds", areaOf)
	if err != nil {
		return 0, nil, err
	}
	if total == 0 {
		return 0, nil, fmt.Errorf("profile: %w", errNoSamples)
	}
	for a, v := range byArea {
		pa := profileArea{Area: a, Share: float64(v) / float64(total)}
		if requests > 0 {
			pa.USPerRequest = float64(v) / 1e3 / float64(requests)
		}
		areas = append(areas, pa)
	}
	slices.SortFunc(areas, func(a, b profileArea) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), strings.Compare(a.Area, b.Area))
	})
	return float64(total) / 1e9, areas, nil
}

// profileRouter records the router's CPU profile over one saturation run
// of s, writes it to the results directory and breaks it down by area.
func profileRouter(env *runEnv, rt *routerProc, s *overheadSystem, seconds int) (*profileResult, error) {
	sup := env.sup
	if s.capacityTier != "" {
		if err := primeCapacity(env, rt, s.capacityTier); err != nil {
			return nil, err
		}
	}
	env.progress("overhead: CPU profile of %s, %d connections, %ds", s.Name, saturationConns, seconds)
	type fetched struct {
		body []byte
		err  error
	}
	got := make(chan fetched, 1)
	go func() {
		b, err := fetchProfile(sup.ctx, "http://"+rt.admin+fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), seconds)
		got <- fetched{b, err}
	}()
	// The load outlasts the profile by a second on each side.
	w, err := runWrk(sup.ctx, sup, "overhead-profile", wrkRun{URL: s.URL, Script: s.script, Threads: saturationThreads,
		Connections: saturationConns, Duration: time.Duration(seconds+2) * time.Second})
	f := <-got
	if err != nil {
		return nil, err
	}
	if f.err != nil {
		return nil, f.err
	}
	if err := os.WriteFile(filepath.Join(env.opts.out, profileFile), f.body, 0o600); err != nil {
		return nil, err
	}
	p, err := profile.Parse(bytes.NewReader(f.body))
	if err != nil {
		return nil, err
	}
	// wrk ran seconds+2 s; count the requests of the profiled seconds.
	requests := int(float64(w.Requests) * float64(seconds) / w.Seconds)
	res := &profileResult{System: s.Name, Seconds: float64(seconds), Requests: requests, File: profileFile}
	res.CPUSeconds, res.Areas, err = breakdown(p, requests)
	return res, err
}

// fetchProfile GETs a profile that takes seconds to record.
func fetchProfile(ctx context.Context, url string, seconds int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: adminClient.Transport}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, tail(string(b), 200))
	}
	return b, nil
}
