package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// samplesDir is config/samples/demo from this package's directory.
var samplesDir = filepath.Join("..", "..", "config", "samples", "demo")

func TestLoadTiersReadsTheSamples(t *testing.T) {
	dt, err := loadTiers(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	if dt.roundRobin.Spec.Strategy != sluicev1.StrategyRoundRobin || dt.capacity.Spec.Strategy != sluicev1.StrategyCapacity {
		t.Fatalf("strategies %q and %q", dt.roundRobin.Spec.Strategy, dt.capacity.Spec.Strategy)
	}
	if !slices.Equal(dt.members, []string{"gpu0", "gpu1", "gpu2"}) || !slices.Contains(dt.members, defaultHiddenMember) {
		t.Fatalf("members %v", dt.members)
	}
	for _, tr := range []*sluicev1.ReplicaTier{dt.roundRobin, dt.capacity} {
		for _, m := range tr.Spec.Members {
			if m.Metrics == nil || m.Metrics.Engine != "vllm" {
				t.Fatalf("%s/%s: the Capacity tier needs vllm metrics to see the hidden load", tr.Name, m.ID)
			}
			if *m.MaxConcurrency != defaultMaxNumSeqs {
				t.Fatalf("%s/%s: ceiling %d, the demo's engines have %d slots", tr.Name, m.ID, *m.MaxConcurrency, defaultMaxNumSeqs)
			}
		}
	}
}

func TestLoadTiersRejects(t *testing.T) {
	rr, err := os.ReadFile(filepath.Join(samplesDir, "roundrobin.yaml")) //nolint:gosec // the repository's own sample.
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc  string
		files map[string]string
		want  string
	}{
		{"no manifests", map[string]string{}, "no manifests"},
		{"one tier only", map[string]string{"rr.yaml": string(rr)}, "one RoundRobin and one Capacity"},
		{"invalid tier", map[string]string{"rr.yaml": strings.Replace(string(rr), "nodeName: demo-node", "nodeName: ''", 1)}, "nodeName"},
		{"no ceilings", map[string]string{
			"rr.yaml":  strings.ReplaceAll(string(rr), ", maxConcurrency: 8", ""),
			"cap.yaml": strings.NewReplacer("demo-roundrobin", "demo-cap", "strategy: RoundRobin", "strategy: Capacity").Replace(string(rr)),
		}, "maxConcurrency"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := loadTiers(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadTiers = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteTiersRewritesEndpoints(t *testing.T) {
	dt, err := loadTiers(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addrs := map[string]string{"gpu0": "127.0.0.1:40001", "gpu1": "127.0.0.1:40002", "gpu2": "127.0.0.1:40003"}
	if err := writeTiers(dir, addrs, dt.roundRobin, dt.capacity); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"demo-roundrobin", "demo-capacity"} {
		raw, err := os.ReadFile(filepath.Join(dir, name+".yaml")) //nolint:gosec // the test's own temporary file.
		if err != nil {
			t.Fatal(err)
		}
		var tr sluicev1.ReplicaTier
		if err := yaml.UnmarshalStrict(raw, &tr); err != nil {
			t.Fatal(err)
		}
		if errs := sluicev1.Validate(&tr); len(errs) > 0 {
			t.Fatalf("%s: %v", name, errs)
		}
		for _, m := range tr.Spec.Members {
			if m.Endpoint != "http://"+addrs[m.ID] {
				t.Fatalf("%s/%s endpoint %q", name, m.ID, m.Endpoint)
			}
		}
	}
	if err := writeTiers(dir, map[string]string{}, dt.capacity); err == nil {
		t.Fatal("writeTiers without engines succeeded")
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.rate != defaultRate || o.hiddenLoad != defaultHiddenLoad || o.duration != defaultDuration {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"--rate", "0"}, {"--duration", "0s"}, {"--max-tokens", "0"}, {"--warmup", "0"},
		{"--hidden-load", "8"}, {"--hidden-load", "-1"}, {"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

// phase builds a phase report from synthetic numbers.
func phase(t *testing.T, strategy sluicev1.Strategy, p99 time.Duration, maxInFlight int, statuses map[int]int) phaseReport {
	t.Helper()
	dt, err := loadTiers(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	tr := dt.roundRobin
	if strategy == sluicev1.StrategyCapacity {
		tr = dt.capacity
	}
	o, _ := parseFlags(nil, io.Discard)
	res := &loadgen.Result{Statuses: statuses, Errors: map[loadgen.ErrorKind]int{},
		HeaderCounts: map[string]int{"gpu0": 2, "gpu1": 1, "gpu2": 1}, Elapsed: time.Second}
	for code, n := range statuses {
		res.Sent += n
		if code == 200 {
			res.Succeeded += n
		} else {
			res.Errors[loadgen.ErrorStatus] += n
		}
	}
	for range 95 {
		res.E2E.Add(10 * time.Millisecond)
	}
	for range 5 {
		res.E2E.Add(p99)
	}
	stats := map[string]enginesim.Stats{
		"gpu0": {MaxInFlight: 3, TotalRequests: 2},
		"gpu1": {MaxInFlight: 2, TotalRequests: 1},
		"gpu2": {MaxInFlight: maxInFlight, TotalRequests: 1},
	}
	return newPhaseReport(&o, tr, res, stats)
}

func TestReportChecks(t *testing.T) {
	o, _ := parseFlags(nil, io.Discard)
	ok := []phaseReport{
		phase(t, sluicev1.StrategyRoundRobin, time.Second, 8, map[int]int{200: 4}),
		phase(t, sluicev1.StrategyCapacity, 500*time.Millisecond, 4, map[int]int{200: 3, 503: 1}),
	}
	rep := newReport(&o, ok)
	if len(rep.Failures) != 0 || !rep.Comparison.CapacityLowerP99 || rep.Comparison.P99E2ERatio != 0.5 {
		t.Fatalf("report %+v", rep)
	}
	if ok[1].Refused != 1 || ok[1].OtherFailures != 0 || ok[0].Members[0].Share != 0.5 || ok[0].Members[2].HiddenLoad != defaultHiddenLoad {
		t.Fatalf("phase %+v", ok[1])
	}
	var out bytes.Buffer
	printPhase(&out, &ok[0])
	printVerdict(&out, &rep)
	for _, want := range []string{"gpu2", "6/8", "50.0%", "refused (503)", "0.50×", "overshoot seen by the engines: 0"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}

	bad := []phaseReport{
		phase(t, sluicev1.StrategyRoundRobin, time.Second, 9, map[int]int{200: 4, 502: 1}),
		phase(t, sluicev1.StrategyCapacity, 2*time.Second, 4, map[int]int{200: 4}),
	}
	rep = newReport(&o, bad)
	if len(rep.Failures) != 2 || rep.Comparison.CapacityLowerP99 || bad[0].Overshoot != 1 || bad[0].OtherFailures != 1 {
		t.Fatalf("failures %v, comparison %+v", rep.Failures, rep.Comparison)
	}
	out.Reset()
	printPhase(&out, &bad[0])
	printVerdict(&out, &rep)
	for _, want := range []string{"OVERSHOOT", "NOT lower", "FAILED checks"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestWriteReportAndChart(t *testing.T) {
	o, _ := parseFlags(nil, io.Discard)
	rep := newReport(&o, []phaseReport{
		phase(t, sluicev1.StrategyRoundRobin, time.Second, 8, map[int]int{200: 4}),
		phase(t, sluicev1.StrategyCapacity, 500*time.Millisecond, 4, map[int]int{200: 4}),
	})
	dir := t.TempDir()
	jsonPath, chartPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "c.svg")
	if err := writeReport(jsonPath, &rep); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(jsonPath) //nolint:gosec // the test's own temporary file.
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Phases []struct {
			Strategy string `json:"strategy"`
			E2E      struct {
				P99 float64 `json:"p99_ms"`
			} `json:"e2e"`
		} `json:"phases"`
		Failures []string `json:"failures"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Phases) != 2 || back.Phases[1].Strategy != "Capacity" || back.Phases[1].E2E.P99 != 500 || back.Failures == nil {
		t.Fatalf("report JSON %s", raw)
	}
	if err := writeChart(chartPath, &rep); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(chartPath) //nolint:gosec // the test's own temporary file.
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Engine max in flight vs ceiling", ">ceiling<", ">RoundRobin<", ">Capacity<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}
