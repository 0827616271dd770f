package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// logLine is one decoded JSON log line.
type logLine map[string]any

// decodeLogs decodes every JSON line of logs.
func decodeLogs(t *testing.T, logs string) []logLine {
	t.Helper()
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// withMsg returns the lines whose message is msg.
func withMsg(lines []logLine, msg string) []logLine {
	var out []logLine
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// wantCounts fails unless line carries exactly the counts in want (JSON
// numbers decode as float64) and none of the names in absent.
func wantCounts(t *testing.T, line logLine, want map[string]float64, absent ...string) {
	t.Helper()
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v in %v", k, line[k], v, line)
		}
	}
	for _, k := range absent {
		if _, ok := line[k]; ok {
			t.Errorf("%s is logged in %v", k, line)
		}
	}
}

// onNode is a valid manifest of the tier ns/NAME (alias NAME) on node.
func onNode(name, node string) string {
	return "apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: " + name + ", namespace: ns}\n" +
		"spec:\n  nodeName: " + node + "\n  aliases: [" + name + "]\n  servedModel: m\n" +
		"  members:\n  - {id: gpu0, endpoint: \"http://127.0.0.1:1\", maxConcurrency: 2}\n"
}

// writeManifests writes files into a fresh directory and returns it.
func writeManifests(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// badManifest is a manifest of node-a whose member ceiling is invalid; its
// endpoint carries a marker that must never be logged.
const badManifest = "apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: bad, namespace: ns}\n" +
	"spec:\n  nodeName: node-a\n  aliases: [bad]\n  servedModel: m\n" +
	"  members:\n  - {id: gpu0, endpoint: \"http://user:endpoint-marker@127.0.0.1:1\", maxConcurrency: 0}\n"

// TestRunReportsConfiguration starts the command on a directory holding a
// tier of this node, one of another node and two invalid files: the
// startup summary counts them, each invalid file gets one WARN naming it
// and its field without speaking of a last good configuration it never
// had, and nothing logged quotes an endpoint.
func TestRunReportsConfiguration(t *testing.T) {
	dir := writeManifests(t, map[string]string{
		"mine.yaml":  onNode("mine", "node-a"),
		"other.yaml": onNode("other", "node-b"),
		"bad.yaml":   badManifest,
		"junk.yaml":  "kind: [",
	})
	p := launch(t, "--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--shutdown-grace", "0s")
	p.cancel()
	p.stopped(t)
	lines := decodeLogs(t, p.logs.String())
	loaded := withMsg(lines, "tier configuration loaded")
	if len(loaded) != 1 {
		t.Fatalf("%d startup summaries, want 1; logs: %s", len(loaded), p.logs)
	}
	wantCounts(t, loaded[0], map[string]float64{"files": 4, "files_rejected": 2, "tiers_served": 1, "tiers_rejected": 0, "tiers_other_node": 1})
	if loaded[0]["level"] != "INFO" || loaded[0]["node"] != "node-a" {
		t.Errorf("summary %v, want INFO naming node-a", loaded[0])
	}
	rejected := withMsg(lines, "manifest rejected; none of its tiers is served")
	var files []string
	for _, l := range rejected {
		files = append(files, l["file"].(string))
		if l["level"] != "WARN" {
			t.Errorf("rejection %v, want WARN", l)
		}
	}
	slices.Sort(files)
	if !slices.Equal(files, []string{"bad.yaml", "junk.yaml"}) {
		t.Fatalf("rejected files %q, want bad.yaml and junk.yaml; logs: %s", files, p.logs)
	}
	for _, l := range rejected {
		if l["file"] == "bad.yaml" && !strings.Contains(l["error"].(string), "spec.members[0].maxConcurrency") {
			t.Errorf("bad.yaml's rejection %v does not name the field", l)
		}
	}
	for _, never := range []string{"last good", "endpoint-marker", "127.0.0.1:1"} {
		if strings.Contains(p.logs.String(), never) {
			t.Errorf("the logs contain %q: %s", never, p.logs)
		}
	}
	if w := withMsg(lines, otherNodesWarning); len(w) != 0 {
		t.Errorf("a tier of this node is served, yet %v", w)
	}
}

// otherNodesWarning is the WARN of a router whose manifests all name other
// nodes.
const otherNodesWarning = "every tier read names another node: this router serves none (check --node-name)"

// TestRunOtherNodeOnly is the sample manifests read with another node's
// name: the router says it serves nothing because every tier names
// another node, naming both, and /readyz fails, unless
// --ready-without-tiers.
func TestRunOtherNodeOnly(t *testing.T) {
	samples, err := filepath.Abs("../../config/samples")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		desc  string
		extra []string
		ready int
	}{
		{desc: "default", ready: http.StatusServiceUnavailable},
		{desc: "ready without tiers", extra: []string{"--ready-without-tiers"}, ready: http.StatusOK},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			p := launch(t, append([]string{"--tiers-dir", samples, "--node-name", "gpu-node-2", "--listen", "127.0.0.1:0",
				"--admin-listen", "127.0.0.1:0", "--shutdown-grace", "0s"}, tt.extra...)...)
			if status := get(t, "http://"+p.started.admin.String()+"/readyz"); status != tt.ready {
				t.Errorf("readyz = %d, want %d", status, tt.ready)
			}
			p.cancel()
			p.stopped(t)
			lines := decodeLogs(t, p.logs.String())
			loaded := withMsg(lines, "tier configuration loaded")
			if len(loaded) != 1 {
				t.Fatalf("%d startup summaries, want 1; logs: %s", len(loaded), p.logs)
			}
			wantCounts(t, loaded[0], map[string]float64{"files": 3, "files_rejected": 0, "tiers_served": 0, "tiers_rejected": 0, "tiers_other_node": 3})
			w := withMsg(lines, otherNodesWarning)
			if len(w) != 1 || w[0]["level"] != "WARN" || w[0]["node"] != "gpu-node-2" {
				t.Fatalf("other nodes warning %v, want one WARN naming gpu-node-2; logs: %s", w, p.logs)
			}
			if nodes, _ := w[0]["manifest_nodes"].([]any); len(nodes) != 1 || nodes[0] != "gpu-node-1" {
				t.Errorf("manifest_nodes = %v, want [gpu-node-1]", w[0]["manifest_nodes"])
			}
		})
	}
}

// TestRunReadyzWithoutTiers proves /readyz fails while the router serves
// no tier (an empty directory), and succeeds with --ready-without-tiers.
func TestRunReadyzWithoutTiers(t *testing.T) {
	for _, tt := range []struct {
		desc  string
		extra []string
		want  int
	}{
		{desc: "default", want: http.StatusServiceUnavailable},
		{desc: "ready without tiers", extra: []string{"--ready-without-tiers"}, want: http.StatusOK},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			p := launch(t, append([]string{"--tiers-dir", t.TempDir(), "--node-name", "node-a", "--listen", "127.0.0.1:0",
				"--admin-listen", "127.0.0.1:0", "--shutdown-grace", "0s"}, tt.extra...)...)
			if status := get(t, "http://"+p.started.admin.String()+"/readyz"); status != tt.want {
				t.Errorf("readyz = %d, want %d", status, tt.want)
			}
			p.cancel()
			p.stopped(t)
		})
	}
}

// TestRunStrictManifests proves --strict-manifests fails the start, before
// the front door listens, with an error listing every rejected manifest
// and tier, and starts on a valid directory; without the flag the same
// directory starts.
func TestRunStrictManifests(t *testing.T) {
	bad := writeManifests(t, map[string]string{
		"mine.yaml":  onNode("mine", "node-a"),
		"bad.yaml":   badManifest,
		"junk.yaml":  "kind: [",
		"twice.yaml": onNode("mine", "node-a"),
	})
	args := func(dir string, extra ...string) []string {
		return append([]string{"--tiers-dir", dir, "--node-name", "node-a", "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--shutdown-grace", "0s"}, extra...)
	}
	logs := &syncBuffer{}
	started := false
	err := run(context.Background(), context.Background(), args(bad, "--strict-manifests"), io.Discard, logs,
		func(startedRouter) { started = true })
	if !errors.Is(err, errStrictManifests) || started {
		t.Fatalf("run = %v, started %v; want errStrictManifests before the front door listens", err, started)
	}
	for _, want := range []string{"3 rejected", "file bad.yaml", "spec.members[0].maxConcurrency", "file junk.yaml", "tier ns/mine: Duplicate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "endpoint-marker") {
		t.Errorf("error %q quotes an endpoint", err)
	}

	for _, dir := range []string{bad, writeManifests(t, map[string]string{"mine.yaml": onNode("mine", "node-a")})} {
		extra := []string{"--strict-manifests"}
		if dir == bad {
			extra = nil // lenient by default.
		}
		p := launch(t, args(dir, extra...)...)
		p.cancel()
		p.stopped(t)
	}
}

// TestConfigReportDeduplicates feeds the report snapshots as reloads
// publish them: every snapshot gets its INFO summary, a rejection is
// logged once until it changes or goes away, a file that turns invalid
// keeps its last good configuration and says so, and the other nodes
// warning follows the same rule.
func TestConfigReportDeduplicates(t *testing.T) {
	logs := &syncBuffer{}
	c := newConfigReport(slog.New(slog.NewJSONHandler(logs, nil)), "node-a", true)
	bad := source.FileError{File: "bad.yaml", Message: "document 0: spec.members: Required value"}
	overLimit := source.FileError{File: "bad.yaml", Message: "ignored: the router serves at most 256 members"}
	kept := source.FileError{File: "mine.yaml", Message: "document 0: not YAML", KeepsLastGood: true}
	dup := source.Rejection{Tier: source.Tier{Key: "ns/x"}, Reason: source.ReasonDuplicate, Message: "tier ns/x is already declared in file a.yaml"}
	others := source.OtherNodes{Tiers: 2, Nodes: []string{"gpu-node-1"}}
	refused := tiers.ApplyResult{Refused: []tiers.RefusedTier{{Key: "ns/y", Message: "member gpu0 has an unusable endpoint"}}}
	steps := []struct {
		desc    string
		s       source.Snapshot
		applied tiers.ApplyResult
		want    []string // the messages logged, in order.
	}{
		{desc: "first load", s: source.Snapshot{Files: 2, Errors: []source.FileError{bad}, OtherNodes: others},
			want: []string{"tier configuration loaded", "manifest rejected; none of its tiers is served", otherNodesWarning}},
		{desc: "the same", s: source.Snapshot{Files: 2, Errors: []source.FileError{bad}, OtherNodes: others},
			want: []string{"tier configuration reloaded"}},
		{desc: "a file turns invalid, a duplicate, a refusal", s: source.Snapshot{Files: 3, Errors: []source.FileError{bad, kept},
			Rejected: []source.Rejection{dup}, OtherNodes: others}, applied: refused,
			want: []string{"tier configuration reloaded", "manifest rejected; its tiers keep their last good configuration", "tier not served"}},
		{desc: "all fixed", s: source.Snapshot{Files: 3}, applied: tiers.ApplyResult{Served: 1},
			want: []string{"tier configuration reloaded"}},
		{desc: "broken again", s: source.Snapshot{Files: 3, Errors: []source.FileError{bad}}, applied: tiers.ApplyResult{Served: 1},
			want: []string{"tier configuration reloaded", "manifest rejected; none of its tiers is served"}},
		{desc: "a second error of the same file", s: source.Snapshot{Files: 3, Errors: []source.FileError{bad, overLimit}},
			applied: tiers.ApplyResult{Served: 1}, want: []string{"tier configuration reloaded", "manifest rejected; none of its tiers is served"}},
		{desc: "both errors again", s: source.Snapshot{Files: 3, Errors: []source.FileError{bad, overLimit}},
			applied: tiers.ApplyResult{Served: 1}, want: []string{"tier configuration reloaded"}},
	}
	seen := 0
	for _, st := range steps {
		c.report(st.s, st.applied)
		lines := decodeLogs(t, logs.String())[seen:]
		seen += len(lines)
		var got []string
		for _, l := range lines {
			got = append(got, l["msg"].(string))
		}
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: logged %q, want %q", st.desc, got, st.want)
		}
		if st.desc == "a file turns invalid, a duplicate, a refusal" {
			wantCounts(t, lines[0], map[string]float64{"files": 3, "files_rejected": 2, "tiers_served": 0, "tiers_rejected": 2, "tiers_other_node": 2})
			if err := c.strictError(); !errors.Is(err, errStrictManifests) || !strings.Contains(err.Error(), "4 rejected") ||
				!strings.Contains(err.Error(), "tier ns/y: member gpu0") {
				t.Errorf("strict error %v, want the two files and two tiers", err)
			}
		}
	}
	if err := c.strictError(); err == nil || !strings.Contains(err.Error(), "2 rejected: file bad.yaml") {
		t.Errorf("strict error %v, want bad.yaml's two errors", err)
	}

	// The kube source counts no files and no other nodes.
	logs = &syncBuffer{}
	c = newConfigReport(slog.New(slog.NewJSONHandler(logs, nil)), "node-a", false)
	c.report(source.Snapshot{}, tiers.ApplyResult{Served: 3})
	lines := decodeLogs(t, logs.String())
	if len(lines) != 1 {
		t.Fatalf("kube mode logged %d lines", len(lines))
	}
	wantCounts(t, lines[0], map[string]float64{"tiers_served": 3, "tiers_rejected": 0}, "files", "files_rejected", "tiers_other_node")
}
