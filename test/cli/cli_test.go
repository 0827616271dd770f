package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// modulePath is the module the programs are built from.
const modulePath = "github.com/sluice-dev/sluice"

// programs are the programs users run, by package path relative to the
// module; the binary is named after the path's last element.
var programs = []string{
	"cmd/router",
	"cmd/enginesim",
	"cmd/manager",
	"cmd/kubectl-sluice",
	"cmd/sluice-qualify",
	"hack/devcluster",
	"bench/demo",
}

// commandTimeout bounds one run of a program: each prints and exits at
// once, so reaching it means a program started something it should not.
const commandTimeout = 30 * time.Second

// servers are the programs that log while they serve: each takes
// --log-level and --log-format, JSON by default.
var servers = map[string]bool{"router": true, "enginesim": true, "manager": true}

// binDir holds the programs built once for the package.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain builds every program into a temporary directory, runs the tests
// and removes the directory.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cli:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, modulePath+"/"+p)
	}
	cmd := exec.Command("go", args...) //nolint:gosec,noctx // building the project's own packages before any test runs.
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cli: building the programs:", err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// result is what one run of a program printed and its exit status.
type result struct {
	code           int
	stdout, stderr string
}

// runProgram runs the program name with args, bounded by commandTimeout,
// without $NODE_NAME or a kubeconfig that could make it reach anything.
func runProgram(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...) //nolint:gosec // the programs built by TestMain.
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "KUBECONFIG=" + filepath.Join(cmd.Dir, "none")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not exit within %v", name, args, commandTimeout)
	case errors.As(err, &exit):
	case err != nil:
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// TestEveryProgram: every program answers --help and -h with help and an
// example on stdout and exit status 0, --version with its version line and
// 0, and an unknown flag, a bad flag value or a stray argument with an
// error and a hint on stderr, nothing on stdout, and exit status 2.
func TestEveryProgram(t *testing.T) {
	for _, p := range programs {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{{"--help"}, {"-h"}} {
				r := runProgram(t, name, args...)
				if r.code != 0 || !strings.Contains(r.stdout, "Usage") || !strings.Contains(r.stdout, "Example") || r.stderr != "" {
					t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 0 and help with an example on stdout only", name, args[0], r.code, r.stdout, r.stderr)
				}
			}
			r := runProgram(t, name, "--version")
			if r.code != 0 || !strings.HasPrefix(r.stdout, name+" ") || strings.Count(r.stdout, "\n") != 1 || r.stderr != "" {
				t.Errorf("%s --version: exit %d, stdout %q, stderr %q; want 0 and one line naming the program", name, r.code, r.stdout, r.stderr)
			}
			bad := [][]string{{"--no-such-flag"}, {"--version=maybe"}}
			if name != "kubectl-sluice" {
				// The plugin's bare arguments are its commands: an unknown
				// one is the same usage error.
				bad = append(bad, []string{"--", "stray"})
			} else {
				bad = append(bad, []string{"stray"}, []string{"-v"})
			}
			if servers[name] {
				help := runProgram(t, name, "--help").stdout
				if !strings.Contains(help, "-log-format") || !strings.Contains(help, "-log-level") {
					t.Errorf("%s --help lists no --log-format or --log-level:\n%s", name, help)
				}
				bad = append(bad, []string{"--log-format", "logfmt"}, []string{"--log-level", "loud"})
			}
			for _, args := range bad {
				r := runProgram(t, name, args...)
				if r.code != 2 || r.stderr == "" || !strings.Contains(r.stderr, "--help") || r.stdout != "" {
					t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want 2, an error and a hint on stderr only", name, args, r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}

// TestProgramsAreListed: every program under cmd/ is in the table above.
func TestProgramsAreListed(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "../../cmd/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if rel := strings.TrimPrefix(pkg, modulePath+"/"); !slices.Contains(programs, rel) {
			t.Errorf("program %s is missing from the table of TestEveryProgram", rel)
		}
	}
}
