package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// doc returns a valid ReplicaTier document for gpu-node-1.
func doc(namespace, name string, aliases ...string) string {
	return "apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: " + name + ", namespace: " + namespace + "}\n" +
		"spec:\n  nodeName: gpu-node-1\n  aliases: [" + strings.Join(aliases, ", ") + "]\n  servedModel: m\n" +
		"  members:\n  - {id: gpu0, endpoint: \"http://127.0.0.1:8001\", maxConcurrency: 2}\n"
}

// harness runs a Files source on a fake clock and hands its snapshots and
// scans to the test.
type harness struct {
	t         *testing.T
	dir       string
	clock     *clocktesting.FakeClock
	snapshots chan Snapshot
	scans     chan bool
	done      chan error
	cancel    context.CancelFunc
}

func newHarness(t *testing.T, files map[string]string) *harness {
	t.Helper()
	h := &harness{
		t:         t,
		dir:       t.TempDir(),
		clock:     clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		snapshots: make(chan Snapshot, 16),
		scans:     make(chan bool, 16),
		done:      make(chan error, 1),
	}
	for name, content := range files {
		h.write(name, content)
	}
	return h
}

// start runs the source and returns its first snapshot.
func (h *harness) start() Snapshot {
	h.t.Helper()
	f, err := NewFiles(FilesOptions{Dir: h.dir, NodeName: "gpu-node-1", Clock: h.clock, Interval: time.Second,
		Scanned: func(published bool) { h.scans <- published }})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- f.Run(ctx, func(s Snapshot) { h.snapshots <- s }) }()
	h.t.Cleanup(h.stop)
	return h.next()
}

// stop cancels Run and waits for it to return: the goroutine has an owner.
func (h *harness) stop() {
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run = %v", err)
	}
	h.done <- nil // let a second stop pass
}

func (h *harness) next() Snapshot {
	h.t.Helper()
	select {
	case s := <-h.snapshots:
		return s
	case err := <-h.done:
		h.t.Fatalf("Run returned %v before publishing", err)
	}
	return Snapshot{}
}

// tick advances the clock by one interval and returns whether the scan it
// caused published; the published snapshot is left in h.snapshots.
func (h *harness) tick() bool {
	h.t.Helper()
	h.clock.Step(time.Second)
	return <-h.scans
}

func (h *harness) write(name, content string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func keys(s Snapshot) string {
	var k []string
	for _, t := range s.Tiers {
		k = append(k, t.Key+"@"+t.File)
	}
	return strings.Join(k, ",")
}

func TestFilesFirstSnapshot(t *testing.T) {
	h := newHarness(t, map[string]string{
		"b.yaml":          doc("ns", "beta", "b") + "---\n" + doc("ns", "alpha", "a"),
		"a.yml":           doc("ns", "gamma", "c"),
		"notes.txt":       "not a manifest",
		".hidden.yaml":    "not read",
		"other-node.yaml": strings.Replace(doc("ns", "far", "a"), "gpu-node-1", "gpu-node-2", 1),
	})
	if err := os.Mkdir(filepath.Join(h.dir, "sub.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := h.start()
	if got, want := keys(s), "ns/alpha@b.yaml,ns/beta@b.yaml,ns/gamma@a.yml"; got != want {
		t.Fatalf("tiers = %s, want %s", got, want)
	}
	if len(s.Errors) != 0 || len(s.Rejected) != 0 {
		t.Fatalf("errors = %v, rejected = %v, want none", s.Errors, s.Rejected)
	}
}

func TestFilesConflicts(t *testing.T) {
	h := newHarness(t, map[string]string{
		"1.yaml": doc("ns", "zeta", "chat", "z"),
		"2.yaml": doc("ns", "alpha", "chat", "a"),
		"3.yaml": doc("ns", "zeta", "other"),
	})
	s := h.start()
	if got, want := keys(s), "ns/alpha@2.yaml"; got != want {
		t.Fatalf("tiers = %s, want %s", got, want)
	}
	if len(s.Rejected) != 2 {
		t.Fatalf("rejected = %+v, want 2", s.Rejected)
	}
	for _, r := range s.Rejected {
		switch r.Tier.File {
		case "1.yaml":
			if r.Reason != ReasonAliasConflict || r.Message != `alias "chat" is held by ns/alpha` {
				t.Errorf("rejection = %+v, want the alias conflict", r)
			}
		case "3.yaml":
			if r.Reason != ReasonDuplicate || !strings.Contains(r.Message, "1.yaml") {
				t.Errorf("rejection = %+v, want the duplicate of 1.yaml", r)
			}
		default:
			t.Errorf("unexpected rejection %+v", r)
		}
	}
}

func TestFilesReload(t *testing.T) {
	h := newHarness(t, map[string]string{"tiers.yaml": doc("ns", "llama", "llama")})
	first := h.start()
	if keys(first) != "ns/llama@tiers.yaml" {
		t.Fatalf("tiers = %s", keys(first))
	}

	// Nothing changed: no snapshot.
	if h.tick() {
		t.Fatal("an unchanged directory published a snapshot")
	}

	// An edit is published.
	h.write("tiers.yaml", strings.Replace(doc("ns", "llama", "llama"), "maxConcurrency: 2", "maxConcurrency: 5", 1))
	if !h.tick() {
		t.Fatal("an edit published nothing")
	}
	s := h.next()
	if got := *s.Tiers[0].Spec.Members[0].MaxConcurrency; got != 5 {
		t.Fatalf("ceiling = %d, want 5", got)
	}
	if got := *first.Tiers[0].Spec.Members[0].MaxConcurrency; got != 2 {
		t.Fatalf("the first snapshot changed to %d: snapshots must be immutable", got)
	}

	// An invalid edit keeps the last good tiers and reports the file.
	h.write("tiers.yaml", strings.Replace(doc("ns", "llama", "llama"), "maxConcurrency: 2", "maxConcurrency: 0", 1))
	if !h.tick() {
		t.Fatal("an invalid edit published nothing")
	}
	s = h.next()
	if keys(s) != "ns/llama@tiers.yaml" || *s.Tiers[0].Spec.Members[0].MaxConcurrency != 5 {
		t.Fatalf("tiers = %s, want the last good config kept", keys(s))
	}
	if len(s.Errors) != 1 || s.Errors[0].File != "tiers.yaml" || !strings.Contains(s.Errors[0].Message, "spec.members[0].maxConcurrency") {
		t.Fatalf("errors = %+v, want tiers.yaml's field error", s.Errors)
	}
	if h.tick() {
		t.Fatal("the same invalid content published again")
	}

	// A new file joins; the broken file stays reported.
	h.write("more.yaml", doc("ns", "embed", "embed"))
	if !h.tick() {
		t.Fatal("a new file published nothing")
	}
	if s = h.next(); keys(s) != "ns/embed@more.yaml,ns/llama@tiers.yaml" || len(s.Errors) != 1 {
		t.Fatalf("tiers = %s, errors = %v", keys(s), s.Errors)
	}

	// Fixing the file clears the error.
	h.write("tiers.yaml", doc("ns", "llama", "llama"))
	if !h.tick() {
		t.Fatal("a fix published nothing")
	}
	if s = h.next(); len(s.Errors) != 0 || *s.Tiers[1].Spec.Members[0].MaxConcurrency != 2 {
		t.Fatalf("errors = %v, tiers = %s", s.Errors, keys(s))
	}

	// Removing a file removes its tiers.
	if err := os.Remove(filepath.Join(h.dir, "tiers.yaml")); err != nil {
		t.Fatal(err)
	}
	if !h.tick() {
		t.Fatal("a removal published nothing")
	}
	if s = h.next(); keys(s) != "ns/embed@more.yaml" {
		t.Fatalf("tiers = %s, want only embed", keys(s))
	}
}

func TestFilesFirstContentInvalid(t *testing.T) {
	h := newHarness(t, map[string]string{"bad.yaml": "kind: [", "good.yaml": doc("ns", "a", "a")})
	s := h.start()
	if keys(s) != "ns/a@good.yaml" || len(s.Errors) != 1 || s.Errors[0].File != "bad.yaml" {
		t.Fatalf("tiers = %s, errors = %+v", keys(s), s.Errors)
	}
}

func TestFilesTooLarge(t *testing.T) {
	h := newHarness(t, map[string]string{"big.yaml": "# " + strings.Repeat("x", MaxFileBytes)})
	s := h.start()
	if len(s.Errors) != 1 || !strings.Contains(s.Errors[0].Message, "exceeds") {
		t.Fatalf("errors = %+v, want the size bound", s.Errors)
	}
}

func TestFilesDirectoryLost(t *testing.T) {
	h := newHarness(t, map[string]string{"a.yaml": doc("ns", "a", "a")})
	h.start()
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	if !h.tick() {
		t.Fatal("losing the directory published nothing")
	}
	s := h.next()
	if keys(s) != "ns/a@a.yaml" || len(s.Errors) != 1 || s.Errors[0].File != "." {
		t.Fatalf("tiers = %s, errors = %+v, want the last good tiers and a directory error", keys(s), s.Errors)
	}
	if strings.Contains(s.Errors[0].Message, h.dir) {
		t.Fatalf("error %q quotes the path", s.Errors[0].Message)
	}
}

func TestFilesRunMissingDirectory(t *testing.T) {
	f, err := NewFiles(FilesOptions{Dir: filepath.Join(t.TempDir(), "missing"), NodeName: "n", Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	published := false
	err = f.Run(context.Background(), func(Snapshot) { published = true })
	if !errors.Is(err, ErrDirectory) || published {
		t.Fatalf("Run = %v (published %v), want ErrDirectory and nothing published", err, published)
	}
}

func TestNewFilesOptions(t *testing.T) {
	if _, err := NewFiles(FilesOptions{NodeName: "n"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no dir: err = %v", err)
	}
	if _, err := NewFiles(FilesOptions{Dir: "d"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no node: err = %v", err)
	}
	for _, tt := range []struct{ in, want time.Duration }{
		{0, DefaultPollInterval},
		{time.Millisecond, MinPollInterval},
		{time.Hour, MaxPollInterval},
		{5 * time.Second, 5 * time.Second},
	} {
		f, err := NewFiles(FilesOptions{Dir: "d", NodeName: "n", Interval: tt.in})
		if err != nil || f.interval != tt.want {
			t.Errorf("Interval %v: got %v, %v; want %v", tt.in, f.interval, err, tt.want)
		}
	}
}

func TestFilesMemberBound(t *testing.T) {
	var big strings.Builder
	for i := range MaxMembers {
		if i > 0 {
			big.WriteString("---\n")
		}
		big.WriteString(doc("ns", "t"+strconv.Itoa(i), "a"+strconv.Itoa(i)))
	}
	h := newHarness(t, map[string]string{"a.yaml": big.String(), "b.yaml": doc("ns", "extra", "extra")})
	s := h.start()
	if len(s.Tiers) != MaxMembers || len(s.Errors) != 1 || s.Errors[0].File != "b.yaml" {
		t.Fatalf("%d tiers, errors %+v; want %d tiers and b.yaml ignored", len(s.Tiers), s.Errors, MaxMembers)
	}
}

// TestFilesCountsManifests proves a snapshot says how many files were read
// and which other nodes' tiers were skipped, the bounded list of their
// node names included, and whether an invalid file keeps a last good
// configuration (a file invalid from the start keeps none).
func TestFilesCountsManifests(t *testing.T) {
	onNode := func(name, node string) string {
		return strings.Replace(doc("ns", name, name), "gpu-node-1", node, 1)
	}
	var many strings.Builder
	for i := range MaxReportedNodes + 2 {
		if i > 0 {
			many.WriteString("---\n")
		}
		many.WriteString(onNode("far"+strconv.Itoa(i), "gpu-node-"+strconv.Itoa(10+i)))
	}
	h := newHarness(t, map[string]string{
		"mine.yaml":  doc("ns", "mine", "mine"),
		"other.yaml": onNode("other", "gpu-node-2") + "---\n" + onNode("odd", "Not_A_Node"),
		"many.yaml":  many.String(),
		"bad.yaml":   strings.Replace(doc("ns", "bad", "bad"), "maxConcurrency: 2", "maxConcurrency: 0", 1),
		"junk.yaml":  "kind: [",
	})
	s := h.start()
	if s.Files != 5 || keys(s) != "ns/mine@mine.yaml" {
		t.Fatalf("files = %d, tiers = %s, want 5 files and ns/mine", s.Files, keys(s))
	}
	if want := MaxReportedNodes + 4; s.OtherNodes.Tiers != want {
		t.Fatalf("other nodes' tiers = %d, want %d", s.OtherNodes.Tiers, want)
	}
	// Sorted, bounded, and an invalid name is not quoted.
	wantNodes := []string{"(invalid node name)", "gpu-node-10", "gpu-node-11", "gpu-node-12", "gpu-node-13", "gpu-node-14", "gpu-node-15", "gpu-node-16"}
	if !slices.Equal(s.OtherNodes.Nodes, wantNodes) {
		t.Fatalf("other nodes = %q, want %q", s.OtherNodes.Nodes, wantNodes)
	}
	if len(s.Errors) != 2 || s.Errors[0].KeepsLastGood || s.Errors[1].KeepsLastGood {
		t.Fatalf("errors = %+v, want bad.yaml and junk.yaml, neither with a last good configuration", s.Errors)
	}

	// A file that turns invalid keeps its last good tiers, and says so.
	h.write("mine.yaml", "kind: [")
	if !h.tick() {
		t.Fatal("an invalid edit published nothing")
	}
	s = h.next()
	if keys(s) != "ns/mine@mine.yaml" || len(s.Errors) != 3 || s.Errors[2].File != "mine.yaml" || !s.Errors[2].KeepsLastGood {
		t.Fatalf("tiers = %s, errors = %+v, want mine.yaml kept and reported", keys(s), s.Errors)
	}
}
