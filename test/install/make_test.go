package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// makeTimeout bounds `make install` and `make uninstall` (each one kubectl
// call).
const makeTimeout = 2 * time.Minute

// managerTimeout bounds how long `make run-manager` may take to build the
// manager (compiled once; a cold cache takes about a minute on 2 cores)
// and accept a tier.
const managerTimeout = 5 * time.Minute

// makeTarget runs make in the repository with kubectl as the admin of c,
// and fails the test when it fails.
func (c *cluster) makeTarget(t *testing.T, target string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), makeTimeout)
	defer cancel()
	//nolint:gosec // the repository's own Makefile, with the test's kubectl.
	out, err := exec.CommandContext(ctx, "make", "-C", repoRoot, target,
		"KUBECTL="+c.kubectl+" --kubeconfig "+c.adminKubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	return string(out)
}

// lockedBuffer is a bytes.Buffer safe for a process's writes and the
// test's reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runManager starts `make run-manager` against c with the manager built
// into bin (manifests and generate are not remade: the test must not write
// the repository's generated files while other suites read them). The
// make process group is killed when the test ends; the returned buffer
// holds what it printed.
func (c *cluster) runManager(t *testing.T, bin string) *lockedBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	//nolint:gosec // the repository's own Makefile.
	cmd := exec.CommandContext(ctx, "make", "-C", repoRoot, "-o", "manifests", "-o", "generate", "run-manager",
		"BIN="+bin, "MANAGER_PROBE_ADDRESS=0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.adminKubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("make run-manager: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return out
}

// TestMakeInstallAndRunManager follows docs/INSTALL.md's path for a user
// with a cluster, against an API server: `make install` applies the CRD,
// `make run-manager` builds and runs the manager with the current
// kubeconfig and accepts a sample tier, and `make uninstall` removes the
// CRD. The manager run is the one `make build` builds, into bin/.
func TestMakeInstallAndRunManager(t *testing.T) {
	c := startCluster(t)
	c.makeTarget(t, "install")
	c.run(t, "wait", "--for=condition=Established", "crd/replicatiers.sluice.dev", "--timeout=60s")

	bin := t.TempDir()
	out := c.runManager(t, bin)
	c.run(t, "apply", "-f", "config/samples/capacity.yaml")
	ctx, cancel := context.WithTimeout(t.Context(), managerTimeout)
	defer cancel()
	//nolint:gosec // the test's own kubectl arguments.
	wait := exec.CommandContext(ctx, c.kubectl, "--kubeconfig", c.adminKubeconfig, "wait",
		"--for=condition=Accepted", "replicatier/llama-70b", "--timeout="+managerTimeout.String())
	if b, err := wait.CombinedOutput(); err != nil {
		t.Fatalf("the tier was not accepted: %v\n%s\n--- make run-manager:\n%s", err, b, out)
	}

	c.makeTarget(t, "uninstall")
	if got := c.run(t, "get", "crd", "--ignore-not-found", "-o", "name"); strings.Contains(got, "replicatiers.sluice.dev") {
		t.Fatalf("the CRD is still installed after make uninstall: %s", got)
	}
	// run-manager runs the manager `make build` builds, not a `go run` copy.
	if _, err := os.Stat(filepath.Join(bin, "manager")); err != nil {
		t.Errorf("make run-manager did not build bin/manager: %v\n%s", err, out)
	}
}
