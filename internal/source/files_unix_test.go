//go:build unix

package source

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFilesNamedPipe puts a FIFO named *.yaml next to a manifest: opening it
// for reading would block until a writer came, freezing reloads and
// shutdown. The scan reports it as a file error, serves the manifest, keeps
// reloading and stops when asked.
func TestFilesNamedPipe(t *testing.T) {
	h := newHarness(t, map[string]string{"a.yaml": doc("ns", "a", "a")})
	if err := syscall.Mkfifo(filepath.Join(h.dir, "pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := make(chan Snapshot, 1)
	go func() { first <- h.start() }()
	var s Snapshot
	select {
	case s = <-first:
	case <-time.After(10 * time.Second): // a guard, not a synchronisation: the scan blocks forever without the fix.
		t.Fatal("the first scan blocked on the named pipe")
	}
	if keys(s) != "ns/a@a.yaml" || len(s.Errors) != 1 || s.Errors[0].File != "pipe.yaml" ||
		!strings.Contains(s.Errors[0].Message, "not a regular file (a named pipe)") {
		t.Fatalf("tiers = %s, errors = %+v, want a.yaml served and pipe.yaml reported", keys(s), s.Errors)
	}
	h.write("b.yaml", doc("ns", "b", "b"))
	if !h.tick() {
		t.Fatal("a new manifest next to the pipe published nothing")
	}
	if s := h.next(); keys(s) != "ns/a@a.yaml,ns/b@b.yaml" || len(s.Errors) != 1 {
		t.Fatalf("tiers = %s, errors = %+v, want both manifests and the pipe's error", keys(s), s.Errors)
	}
}
