package plugin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/evidence"
)

// decisionLines renders records as decision log lines.
func decisionLines(t *testing.T, records ...evidence.Record) string {
	t.Helper()
	var b strings.Builder
	for _, r := range records {
		line, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
	}
	return b.String()
}

// runOffline runs the command line without a cluster: connecting fails
// the test.
func runOffline(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut},
		func() (client.WithWatch, string, error) {
			t.Fatal("summarize connected to a cluster")
			return nil, "", nil
		})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestDecisionsSummarize(t *testing.T) {
	start := time.Unix(1_700_000_000, 0).UTC()
	admitted := func(member string, end evidence.StreamOutcome) evidence.Record {
		return evidence.Record{RequestID: "r-" + member, Time: start, Duration: time.Millisecond, Alias: "llama", Tier: "inference/llama",
			Outcome: evidence.OutcomeAdmitted, Status: 200, Member: member, Dispatch: 10 * time.Microsecond, End: end}
	}
	dir := t.TempDir()
	current := filepath.Join(dir, "decisions.jsonl")
	rotated := current + ".1"
	if err := os.WriteFile(rotated, []byte(strings.TrimSuffix(decisionLines(t, admitted("gpu1", evidence.StreamTruncated)), "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	log := decisionLines(t,
		admitted("gpu0", evidence.StreamComplete),
		evidence.Record{RequestID: "r-busy", Time: start, Duration: time.Millisecond, Alias: "llama", Tier: "inference/llama",
			Outcome: evidence.OutcomeNotAdmitted, Status: 503, Code: evidence.CodeCapacityExhausted},
		evidence.Record{RequestID: "r-unknown", Time: start, Duration: time.Millisecond,
			Outcome: evidence.OutcomeRefused, Status: 404, Code: "model_not_found"},
	) + "not a record\n"
	if err := os.WriteFile(current, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := runOffline(t, "", "decisions", "summarize", rotated, current, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s evidence.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if s.Records != 4 || s.InvalidRecords != 1 || s.Outcomes["admitted"] != 2 || s.Outcomes["not_admitted"] != 1 ||
		s.Outcomes["refused"] != 1 || s.Members["inference/llama"]["gpu0"] != 1 || s.Members["inference/llama"]["gpu1"] != 1 ||
		s.StreamOutcomes["complete"] != 1 || s.StreamOutcomes["truncated"] != 1 ||
		s.RefusalReasons["capacity_exhausted"] != 1 || s.RefusalReasons["model_not_found"] != 1 {
		t.Fatalf("summary %+v", s)
	}

	// The table, from standard input.
	out, err = runOffline(t, log, "decisions", "summarize", "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECORDS", "3 ", "capacity_exhausted", "model_not_found", "inference/llama", "gpu0", "complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gpu1") {
		t.Errorf("table from standard input counts the rotated file:\n%s", out)
	}

	for _, bad := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"decisions", "summarize", filepath.Join(dir, "missing.jsonl")}, "no such file"},
		{"garbage\n", []string{"decisions", "summarize", "-"}, "no valid decision record"},
		{log, []string{"decisions", "summarize", "-", "-o", "yaml"}, "--output must be"},
		{"", []string{"decisions", "summarize"}, "requires at least 1 arg"},
	} {
		if _, err := runOffline(t, bad.stdin, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: error %v, want %q", bad.args, err, bad.want)
		}
	}
}
