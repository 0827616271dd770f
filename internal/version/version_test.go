package version

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestStringNamesProgramVersionAndRevision(t *testing.T) {
	old, oldRev := version, revision
	t.Cleanup(func() { version, revision = old, oldRev })
	version, revision = "v1.2.3", "0123abcd"
	got := String("router")
	want := "router v1.2.3 (revision 0123abcd, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}

func TestUnstampedBuildIsDevel(t *testing.T) {
	old, oldRev := version, revision
	t.Cleanup(func() { version, revision = old, oldRev })
	version, revision = "", ""
	// A test binary has no module version and no VCS stamp.
	if v := Version(); v != devel {
		t.Fatalf("Version = %q, want %q", v, devel)
	}
	if r := Revision(); r == "" {
		t.Fatal("Revision is empty, want a revision or \"unknown\"")
	}
}

// TestLinkerStampsTheBuild builds a program with the ldflags the Makefile
// and the Dockerfile pass, and checks what it prints.
func TestLinkerStampsTheBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "probe")
	const pkg = "github.com/sluice-dev/sluice/internal/version"
	//nolint:gosec,noctx // builds the package's own probe.
	build := exec.Command("go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-X "+pkg+".version=v9.8.7 -X "+pkg+".revision=feedbeef", "./testdata/probe")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output() //nolint:gosec,noctx // the probe just built.
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.HasPrefix(got, "probe v9.8.7 (revision feedbeef, ") {
		t.Fatalf("stamped program printed %q", got)
	}
}
