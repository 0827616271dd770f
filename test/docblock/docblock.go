// Package docblock finds the shell blocks a document marks for a test and
// runs them as written: a block is the fenced `sh` block right after a
// `<!-- MARKER: NAME -->` comment. The README's quick starts
// (test/quickstart) and the install sequence of docs/INSTALL.md
// (test/cluster) are run this way, so the documents cannot drift from what
// the tests prove.
package docblock

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
)

// Blocks returns the blocks of the document at path marked with marker, by
// name.
func Blocks(path, marker string) (map[string]string, error) {
	doc, err := os.ReadFile(path) //nolint:gosec // the repository's own documents.
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + ": ([a-z-]+) -->\n```sh\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		if _, dup := out[m[1]]; dup {
			return nil, fmt.Errorf("%s marks two blocks %q", path, m[1])
		}
		out[m[1]] = m[2]
	}
	return out, nil
}

// Run runs script in bash (-e, -u, pipefail) in dir, with env added to this
// process's environment, and returns what it printed, standard output and
// standard error together. The script runs in its own process group, which
// Run kills when the script ends or ctx ends, so nothing it started in the
// background outlives it. The error of a failed script carries the script
// and its output.
func Run(ctx context.Context, dir string, env []string, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script) //nolint:gosec // the documents' own commands.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		return out.String(), fmt.Errorf("the block failed (%w):\n%s\n--- output:\n%s", err, script, out.String())
	}
	return out.String(), nil
}
