package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// newEvidenceLog returns a decision log for a fixture, with a JSONL file
// sink when file is set. The sink is closed at cleanup (and may be closed
// earlier by the test).
func newEvidenceLog(t *testing.T, file string) (*evidence.Log, *evidence.FileSink) {
	t.Helper()
	var sink *evidence.FileSink
	opts := evidence.LogOptions{Size: evidence.DefaultLogSize}
	if file != "" {
		var err error
		if sink, err = evidence.OpenFileSink(evidence.FileSinkOptions{Path: file}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close() })
		opts.Sink = sink
	}
	l, err := evidence.NewLog(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, sink
}

// recordJSON decodes a record's JSON generically.
func recordJSON(t *testing.T, r evidence.Record) map[string]any {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkTerminalEvidence checks, for one terminal path of TestTerminalPaths,
// that the request produced exactly one decision record, with exactly one
// attempt on gpu0 ending as the outcome did, and for Capacity the captured
// selection (the very Decision the lease handed out) and for RoundRobin
// none.
func checkTerminalEvidence(t *testing.T, f *fixture, o Outcome, strategy v1alpha1.Strategy) {
	t.Helper()
	if n := f.evidence.Len(); n != 1 {
		t.Fatalf("%d decision records, want exactly 1", n)
	}
	rec, ok := f.evidence.Find(o.RequestID)
	if !ok {
		t.Fatal("no decision record for the request")
	}
	m := recordJSON(t, rec)
	attempts, _ := m["attempts"].([]any)
	if m["outcome"] != "admitted" || len(attempts) != 1 {
		t.Fatalf("record %v, want admitted with one attempt", m)
	}
	a := attempts[0].(map[string]any)
	if a["member_id"] != "gpu0" || a["stream_outcome"] != string(o.End) || a["status_class"] != evidence.StatusClass(o.Status) {
		t.Errorf("attempt %v, want gpu0 ending %s", a, o.End)
	}
	if ej, _ := a["ejection"].(string); ej != string(o.Ejection) {
		t.Errorf("attempt ejection %q, want %q", ej, o.Ejection)
	}
	if pe, _ := a["protocol_error"].(string); pe != string(o.ProtocolError) {
		t.Errorf("attempt protocol_error %q, want %q", pe, o.ProtocolError)
	}
	_, hasPayload := m["replica_scheduler"]
	line := rec.String()
	if strategy != v1alpha1.StrategyCapacity {
		if rec.Scheduler != nil || hasPayload || strings.Contains(line, "replica_scheduler") {
			t.Errorf("a %s record carries scheduler evidence: %v / %s", strategy, m, line)
		}
		return
	}
	if rec.Scheduler == nil || rec.Scheduler != o.Selection || !rec.SchedulerValid() || !hasPayload {
		t.Fatalf("record payload %+v, want the outcome's captured selection %+v", rec.Scheduler, o.Selection)
	}
	if d := rec.Scheduler; d.SelectedMemberID != "gpu0" || len(d.EligibleIDs) != 2 || d.Scores[0].LocalActive != 0 {
		t.Errorf("captured decision %+v, want gpu0 selected among 2 at 0 active", d)
	}
	suffix := " replica_scheduler=capacity replica_scheduler_reason=selected replica_eligible_count=2"
	if o.Ejection != "" {
		suffix += " ejection=" + string(o.Ejection) // an ejection's attribute comes after the scheduler's.
	}
	if o.ProtocolError != "" {
		suffix += " protocol_error=" + string(o.ProtocolError) // a protocol error's comes last.
	}
	if !strings.HasSuffix(line, suffix) {
		t.Errorf("line %s", line)
	}
}

// TestRefusalRecords checks gate and admission refusals on a Capacity tier
// each produce one record with their reason, no attempt and no scheduler
// payload.
func TestRefusalRecords(t *testing.T) {
	f := newFixture(t, fixtureOptions{maxBody: 256})
	gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
	release := make(chan struct{})
	gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, "{}")
	})
	f.apply(
		sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 1}}, tierMax(1)),
		sourcetest.Tier("ns/quiet", []string{"quiet"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 1}}, func(s *v1alpha1.ReplicaTierSpec) {
				s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "maintenance"}
			}),
	)
	// Hold the llama tier's only slot.
	held := make(chan error, 1)
	go func() {
		resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		held <- err
	}()
	gpu0.waitArrival(t)

	for _, tt := range []struct {
		body, code string
		outcome    evidence.Outcome
	}{
		{`{"messages":[]}`, "invalid_request_body", evidence.OutcomeRefused},
		{chat("nope"), "model_not_found", evidence.OutcomeRefused},
		{`{"model":"llama","pad":"` + strings.Repeat("x", 300) + `"}`, "request_too_large", evidence.OutcomeRefused},
		{chat("llama"), "capacity_exhausted", evidence.OutcomeNotAdmitted},
		{chat("quiet"), "tier_quiesced", evidence.OutcomeNotAdmitted},
	} {
		f.mustPost(pathChatCompletions, tt.body, nil)
		o := f.outcome()
		rec, ok := f.evidence.Find(o.RequestID)
		if !ok {
			t.Fatalf("%s: no record", tt.code)
		}
		m := recordJSON(t, rec)
		_, hasPayload := m["replica_scheduler"]
		if rec.Outcome != tt.outcome || m["refusal_reason"] != tt.code || len(m["attempts"].([]any)) != 0 ||
			hasPayload || rec.Scheduler != nil || strings.Contains(rec.String(), "replica") {
			t.Errorf("%s: record %v", tt.code, m)
		}
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	f.outcome()
	if s := f.evidence.Summary(); s.Records != 6 || s.Outcomes["admitted"] != 1 || s.WinnerFreshness["unknown"] != 1 {
		t.Fatalf("summary %+v", s)
	}
}

// TestAccessLineUnchanged checks the router's slog access line: for
// RoundRobin, direct and refused requests it is byte-identical to the line
// the router logged before decision records existed (these nine attributes
// in this order); a Capacity request appends exactly the three replica
// attributes.
func TestAccessLineUnchanged(t *testing.T) {
	var logs syncBuffer
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	outcomes := make(chan Outcome, 8)
	rt := New(Options{
		Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})),
		Recorder: recorderFunc(func(o Outcome) { outcomes <- o }),
	})
	defer rt.Close()
	member := newUpstream(t, "gpu0", nil)
	rt.Tiers().Apply(sourcetest.Snapshot(
		sourcetest.Tier("ns/rr", []string{"rr"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu0", Endpoint: member.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: member.srv.URL, Max: 2}}),
		sourcetest.Tier("ns/cap", []string{"cap"}, v1alpha1.StrategyCapacity, []sourcetest.Member{{ID: "gpu0", Endpoint: member.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: member.srv.URL, Max: 2}}),
		sourcetest.Tier("ns/direct", []string{"direct"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: member.srv.URL}}),
	))
	front := httptest.NewServer(rt)
	defer front.Close()

	legacy := func(o Outcome) string {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})).LogAttrs(
			context.Background(), slog.LevelDebug, "request",
			slog.String("request_id", o.RequestID),
			slog.String("tier", o.Tier),
			slog.String("member", o.Member),
			slog.String("result", string(o.Result)),
			slog.String("code", o.Code),
			slog.Int("status", o.Status),
			slog.String("end", string(o.End)),
			slog.Duration("duration", o.Duration),
			slog.Duration("first_byte", o.FirstByte),
		)
		return buf.String()
	}
	for _, model := range []string{"rr", "direct", "unknown-model", "cap"} {
		before := len(logs.String())
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, front.URL+pathChatCompletions, strings.NewReader(chat(model)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		o := <-outcomes
		got := logs.String()[before:]
		want := legacy(o)
		if model == "cap" {
			want = strings.TrimSuffix(want, "}\n") + `,"replica_scheduler":"capacity","replica_scheduler_reason":"selected","replica_eligible_count":2}` + "\n"
		}
		if got != want {
			t.Errorf("%s: access line\n got %s\nwant %s", model, got, want)
		}
	}
}

// checkEvidenceSentinel checks every evidence surface of a fixture — the
// records in memory, their JSON, their lines, the summary and the JSONL
// file — for the forbidden strings of TestSentinel.
func checkEvidenceSentinel(t *testing.T, f *fixture, check func(what, text string)) {
	t.Helper()
	records := f.evidence.Latest(evidence.MaxListLimit)
	if len(records) == 0 {
		t.Fatal("no decision records")
	}
	for _, r := range records {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		check("a decision record", string(data))
		check("a decision line", r.String())
		check("a decision record in memory", fmt.Sprintf("%#v", r))
	}
	summary, _ := json.Marshal(f.evidence.Summary())
	check("the decision summary", string(summary))
	if err := f.sink.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(f.sinkPath))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != len(records) {
		t.Fatalf("the decision file has %d records, memory %d", n, len(records))
	}
	check("the decision file", string(data))
	fileSummary, err := evidence.SummarizeJSONL(bytes.NewReader(data))
	if err != nil || fileSummary.InvalidRecords != 0 || fileSummary.Records != len(records) {
		t.Fatalf("the file does not ingest cleanly: %+v, %v", fileSummary, err)
	}
	fs, _ := json.Marshal(fileSummary)
	if string(fs) != string(summary) {
		t.Errorf("file summary %s differs from the memory summary %s", fs, summary)
	}
}

// TestAccessLog proves Options.AccessLog: every request's line at INFO,
// refusals and served requests alike, and a failed exchange's still at
// WARN; without it the same lines are at DEBUG, a logger at INFO drops
// them and keeps the failure.
func TestAccessLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("access log %v", on), func(t *testing.T) {
			var logs syncBuffer
			rt := New(Options{
				Logger:    slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
				AccessLog: on,
			})
			defer rt.Close()
			good, bad := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
			bad.handle(func(w http.ResponseWriter, _ *http.Request) { resetConnection(w) })
			rt.Tiers().Apply(sourcetest.Snapshot(
				sourcetest.Tier("ns/good", []string{"good"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: good.srv.URL}}),
				sourcetest.Tier("ns/bad", []string{"bad"}, "", []sourcetest.Member{{ID: "gpu1", Endpoint: bad.srv.URL}}),
			))
			front := httptest.NewServer(rt)
			defer front.Close()
			for _, model := range []string{"good", "unknown-model", "bad"} {
				resp, err := http.Post(front.URL+pathChatCompletions, "application/json", strings.NewReader(chat(model))) //nolint:noctx // a test request.
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			lines := map[string]string{} // result or end → level.
			for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
				var l struct{ Level, Msg, Result, End string }
				if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != "request" {
					continue
				}
				lines[l.Result+"/"+l.End] = l.Level
			}
			want := map[string]string{"refused/": "INFO", "admitted/complete": "INFO", "admitted/upstream_unavailable": "WARN"}
			if !on {
				want = map[string]string{"admitted/upstream_unavailable": "WARN"}
			}
			if !maps.Equal(lines, want) {
				t.Fatalf("request lines by level %v, want %v\n%s", lines, want, logs.String())
			}
		})
	}
}
