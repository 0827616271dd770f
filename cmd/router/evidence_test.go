package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/evidence"
)

// Markers planted in every input of the evidence test.
const (
	evPrompt    = "PROMPT-SENTINEL-e1"
	evBadKey    = "KEY-SENTINEL-e2"
	evAPIKey    = "APIKEY-SENTINEL-e3"
	evAdmin     = "ADMINTOKEN-SENTINEL-e4"
	evUpstream  = "UPSTREAM-SENTINEL-e5"
	evRawMetric = "RAWMETRIC-SENTINEL-e6"
)

// evidenceEngine is a fake vLLM engine: its model list, a chat route that
// answers with a marker, /metrics with markers in help text and labels, and
// /broken-metrics failing with a marker.
func evidenceEngine(t *testing.T, probed chan<- struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"served/model","object":"model"}]}`)
			select {
			case probed <- struct{}{}:
			default:
			}
		case "/metrics":
			_, _ = io.WriteString(w, "# HELP vllm:num_requests_running "+evRawMetric+"\n# TYPE vllm:num_requests_running gauge\n"+
				`vllm:num_requests_running{model_name="`+evRawMetric+`"} 1`+"\n"+
				`vllm:num_requests_waiting{model_name="`+evRawMetric+`"} 0`+"\n")
		case "/broken-metrics":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, evRawMetric+" exploded")
		default:
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("X-Engine", evUpstream)
			_, _ = io.WriteString(w, `{"content":"`+evUpstream+`"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// metricsPollInterval is how often TestRunEvidence reads /metrics while
// the series it expects are still on their way.
const metricsPollInterval = 10 * time.Millisecond

// TestRunEvidence runs the command with a Capacity tier, a decision log
// file and both tokens, sends requests through every input with markers
// planted, and checks: GET /metrics is open and carries the metrics of
// docs/EVIDENCE.md#6-metrics, the decision endpoints need the admin token and explain the Capacity
// selection, the file holds exactly one record per request once run
// returns, and no marker, address, credential or Go error text appears in
// any metric, record, summary, file or log line.
func TestRunEvidence(t *testing.T) {
	probed := make(chan struct{}, 1)
	up := evidenceEngine(t, probed)
	dir := t.TempDir()
	manifest := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: llama, namespace: ns}
spec:
  nodeName: node-a
  aliases: [llama]
  servedModel: served/model
  strategy: Capacity
  members:
  - {id: gpu0, endpoint: %q, maxConcurrency: 4, metrics: {engine: vllm}}
  - {id: gpu1, endpoint: %q, maxConcurrency: 4, metrics: {engine: vllm, path: /broken-metrics}}
`, up.URL, up.URL)
	tiers := filepath.Join(dir, "tiers")
	if err := os.Mkdir(tiers, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(tiers, "tiers.yaml"): manifest,
		filepath.Join(dir, "keys"):         evAPIKey + "\n",
		filepath.Join(dir, "admin"):        evAdmin + "\n",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	decisions := filepath.Join(dir, "decisions.jsonl")
	args := []string{"--tiers-dir", tiers, "--node-name", "node-a", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--api-keys-file", filepath.Join(dir, "keys"), "--admin-token-file", filepath.Join(dir, "admin"),
		"--decision-log-file", decisions, "--decision-log-size", "64", "--log-level", "DEBUG", "--enable-pprof"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, result := make(chan startedRouter, 1), make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		result <- run(ctx, context.Background(), args, io.Discard, logs, func(s startedRouter) { started <- s })
	}()
	var s startedRouter
	select {
	case s = <-started:
	case err := <-result:
		t.Fatalf("run = %v; logs %s", err, logs)
	case <-time.After(failSafe):
		t.Fatal("the router did not start")
	}
	select {
	case <-probed:
	case <-time.After(failSafe):
		t.Fatal("no readiness probe")
	}
	for _, id := range []string{"gpu0", "gpu1"} {
		pctx, stop := context.WithTimeout(context.Background(), failSafe)
		if ready, err := s.probes.ProbeNow(pctx, "ns/llama", id); err != nil || !ready {
			t.Fatalf("probe %s: %v %v", id, ready, err)
		}
		stop()
	}

	front, admin := "http://"+s.front.String(), "http://"+s.admin.String()
	client := &http.Client{Transport: &http.Transport{}}
	do := func(method, url, body string, header http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(data)
	}
	auth := http.Header{"Authorization": {"Bearer " + evAPIKey}}
	prompt := `{"model":"llama","messages":[{"role":"user","content":"` + evPrompt + `"}]}`
	sent := 0
	for _, tt := range []struct {
		body   string
		header http.Header
		want   int
	}{
		{prompt, auth, 200},
		{prompt, http.Header{"Authorization": {"Bearer " + evBadKey}}, 401},
		{`{"model":"` + evPrompt + `"}`, auth, 404},
		{`{"messages":"` + evPrompt + `"}`, auth, 400},
		{prompt, http.Header{"Authorization": {"Bearer " + evAPIKey}, "X-Request-Id": {up.URL + "/" + evPrompt}}, 200},
		{prompt, http.Header{"Authorization": {"Bearer " + evAPIKey}, "X-Request-Id": {"req-evidence-1"}}, 200},
	} {
		if status, body := do(http.MethodPost, front+"/v1/chat/completions", tt.body, tt.header); status != tt.want {
			t.Fatalf("status %d %s, want %d", status, body, tt.want)
		}
		sent++
	}

	// Metrics: open, every series below present, and the fetches of both
	// members counted. The series come as the router works: an outcome is
	// recorded just after its client read the last byte, a member's
	// pressure once its fetch completed; so /metrics is read until all are
	// there, at most failSafe.
	wants := []string{
		`sluice_tier_active_requests{tier="ns/llama"} 0`,
		`sluice_tier_max_concurrency{tier="ns/llama"} 8`,
		`sluice_member_active_requests{member="gpu0",tier="ns/llama"} 0`,
		`sluice_member_max_concurrency{member="gpu1",tier="ns/llama"} 4`,
		`sluice_member_ready{member="gpu0",tier="ns/llama"} 1`,
		`sluice_member_pressure_freshness{freshness="failed",member="gpu1",tier="ns/llama"} 1`,
		`sluice_requests_total{member="",outcome="refused",tier=""} 3`,
		// Series the configuration determines, at zero since the apply.
		`sluice_requests_total{member="",outcome="not_admitted",tier="ns/llama"} 0`,
		`sluice_admission_refusals_total{reason="capacity_exhausted",tier="ns/llama"} 0`,
		`sluice_stream_outcomes_total{member="gpu1",outcome="truncated",tier="ns/llama"} 0`,
		`sluice_member_ejections_total{member="gpu0",reason="connection_refused",tier="ns/llama"} 0`,
		`sluice_member_protocol_errors_total{member="gpu1",reason="response_head_too_large",tier="ns/llama"} 0`,
		`sluice_schedule_duration_seconds_count{tier="ns/llama"} 3`,
		// The admission queue's series, at zero on a tier without a queue
		// (docs/OPERATIONS.md#router-metrics).
		`sluice_queue_waiting_requests{tier="ns/llama"} 0`,
		`sluice_queue_oldest_wait_seconds{tier="ns/llama"} 0`,
		`sluice_queue_outcomes_total{reason="queue_timeout",tier="ns/llama"} 0`,
		`sluice_queue_wait_seconds_count{tier="ns/llama"} 0`,
		`sluice_upstream_first_byte_seconds_count{member=`,
		`sluice_pressure_age_seconds{member="gpu0",tier="ns/llama"}`,
		`sluice_decision_log_dropped_total{reason="queue_full"} 0`,
		// The model-server gauges a cluster picker scrapes
		// (docs/OPERATIONS.md#model-server-gauges).
		`vllm:num_requests_running{model_name="served/model",tier="ns/llama"} 0`,
		`vllm:num_requests_waiting{model_name="served/model",tier="ns/llama"} `,
		`sluice_decision_scheduler_evidence_dropped_total 0`,
		`sluice_build_info{goversion="go`,
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	}
	missing := func(metrics string) []string {
		var out []string
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				out = append(out, want)
			}
		}
		if !strings.Contains(metrics, `sluice_pressure_fetch_total{result="success"} `) ||
			strings.Contains(metrics, `sluice_pressure_fetch_total{result="success"} 0`) ||
			strings.Contains(metrics, `sluice_pressure_fetch_total{result="http_error"} 0`) {
			out = append(out, "a counted success and http_error of the pressure fetches")
		}
		return out
	}
	var metrics string
	poll := time.NewTicker(metricsPollInterval)
	defer poll.Stop()
	for deadline := time.Now().Add(failSafe); ; <-poll.C {
		var status int
		status, metrics = do(http.MethodGet, admin+"/metrics", "", http.Header{})
		if status != http.StatusOK {
			t.Fatalf("/metrics = %d", status)
		}
		lacks := missing(metrics)
		if len(lacks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q:\n%s", lacks, metrics)
		}
	}

	// Profiles (--enable-pprof): behind the admin token.
	if status, _ := do(http.MethodGet, admin+"/debug/pprof/", "", http.Header{}); status != http.StatusUnauthorized {
		t.Fatalf("pprof without the token = %d, want 401", status)
	}
	pprofAuth := http.Header{"Authorization": {"Bearer " + evAdmin}}
	if status, body := do(http.MethodGet, admin+"/debug/pprof/", "", pprofAuth); status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof index = %d %.200s", status, body)
	}
	if status, body := do(http.MethodGet, admin+"/debug/pprof/heap?debug=1", "", pprofAuth); status != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("pprof heap = %d %.200s", status, body)
	}

	// Decisions: behind the admin token.
	if status, _ := do(http.MethodGet, admin+"/admin/v1/decisions", "", http.Header{}); status != http.StatusUnauthorized {
		t.Fatalf("decisions without the token = %d", status)
	}
	adminAuth := http.Header{"Authorization": {"Bearer " + evAdmin}}
	status, list := do(http.MethodGet, admin+"/admin/v1/decisions?limit=64", "", adminAuth)
	var view struct {
		Decisions []json.RawMessage `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(list), &view); status != http.StatusOK || err != nil || len(view.Decisions) != sent {
		t.Fatalf("decisions: %d %s", status, list)
	}
	status, one := do(http.MethodGet, admin+"/admin/v1/decisions/req-evidence-1", "", adminAuth)
	rec, err := evidence.ParseRecord([]byte(one))
	if status != http.StatusOK || err != nil || rec.Scheduler == nil || rec.Scheduler.SelectedMemberID != rec.Member ||
		len(rec.Scheduler.EligibleIDs) != 2 {
		t.Fatalf("decision: %d %s %v", status, one, err)
	}
	_, summary := do(http.MethodGet, admin+"/admin/v1/decisions/summary", "", adminAuth)

	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return")
	}
	file, err := os.ReadFile(decisions) //nolint:gosec // The test's own temporary file.
	if err != nil {
		t.Fatal(err)
	}
	fileSummary, err := evidence.SummarizeJSONL(bytes.NewReader(file))
	if err != nil || fileSummary.Records != sent || fileSummary.InvalidRecords != 0 || fileSummary.Outcomes["admitted"] != 3 {
		t.Fatalf("file summary %+v, %v\n%s", fileSummary, err, file)
	}
	if fs, _ := json.MarshalIndent(fileSummary, "", "  "); strings.TrimSpace(string(fs)) != strings.TrimSpace(summary) {
		t.Errorf("the file's summary\n%s\ndiffers from the endpoint's\n%s", fs, summary)
	}

	forbidden := []string{evPrompt, evBadKey, evAPIKey, evAdmin, evUpstream, evRawMetric,
		"127.0.0.1", strings.TrimPrefix(up.URL, "http://"), "http://", "dial tcp", "connection refused",
		"EOF", "context canceled", "context deadline", "net/http", "exploded"}
	for what, text := range map[string]string{
		"/metrics": metrics, "the decision list": list, "a decision": one, "the summary": summary,
		"the decision file": string(file), "the logs": logs.String(),
	} {
		for _, f := range forbidden {
			if what == "the logs" && (f == "127.0.0.1") {
				continue // the startup line names the listen addresses, which are the router's own.
			}
			if strings.Contains(text, f) {
				t.Errorf("%s contains %q", what, f)
			}
		}
	}
}
