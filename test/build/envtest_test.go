package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// envtestDir holds the control plane's pinned module and its scripts.
var envtestDir = filepath.Join(repoRoot, "hack", "envtest")

// controlPlane are the programs `make envtest-bins` installs.
var controlPlane = []string{"etcd", "kube-apiserver", "kubectl"}

// scriptTimeout bounds one run of a script or of make; reached only when
// the test fails (the runs here take well under a second, the build of
// setup-envtest a minute with a cold cache).
const scriptTimeout = 3 * time.Minute

// probeTimeout is the ENVTEST_PROBE_TIMEOUT the tests give download.sh, in
// seconds, and failFast the longest a failed attempt may take with it.
const (
	probeTimeout = 1
	failFast     = 10 * time.Second
)

// pinnedVersion returns the Kubernetes version hack/envtest/go.mod pins.
func pinnedVersion(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = envtestDir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in hack/envtest: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// buildStamp is build.sh's stamp: the hash of go.mod, go.sum and build.sh.
func buildStamp(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "build.sh"} {
		b, err := os.ReadFile(filepath.Join(envtestDir, f)) //nolint:gosec // the repository's own files.
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// setupEnvtest builds the pinned setup-envtest into a temporary directory.
func setupEnvtest(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "setup-envtest")
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "sigs.k8s.io/controller-runtime/tools/setup-envtest") //nolint:gosec // a temporary path of the test's own.
	cmd.Dir = filepath.Join(repoRoot, "hack", "tools", "setup-envtest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build setup-envtest: %v\n%s", err, out)
	}
	return bin
}

// envtestArchive returns a release archive laid out as controller-tools'
// (controller-tools/envtest/NAME), each program a script printing its name.
func envtestArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range controlPlane {
		body := []byte("#!/bin/sh\necho " + name + "\n")
		if err := tw.WriteHeader(&tar.Header{Name: "controller-tools/envtest/" + name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// releaseSite serves an envtest release index listing version for this
// platform, and its archive, on loopback; it counts the requests.
func releaseSite(t *testing.T, version string) (index string, requests *atomic.Int64) {
	t.Helper()
	archive := envtestArchive(t)
	sum := sha512.Sum512(archive)
	name := fmt.Sprintf("envtest-%s-%s-%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/index.yaml":
			w.Header().Set("Content-Type", "application/yaml")
			//nolint:gosec // r.Host is the test's own loopback server.
			fmt.Fprintf(w, "releases:\n  %s:\n    %s:\n      hash: %s\n      selfLink: http://%s/%s\n",
				version, name, hex.EncodeToString(sum[:]), r.Host, name)
		case "/" + name:
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/index.yaml", requests
}

// closedAddress returns a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentAddress returns a loopback address that accepts connections and
// never answers, as a firewall that drops the replies would look; the
// connections are closed when the test ends.
func silentAddress(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- c:
			default:
				_ = c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// download runs hack/envtest/download.sh into out with env added, and
// returns its output, how long it took and its error.
func download(t *testing.T, out string, env ...string) (string, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(envtestDir, "download.sh"), out) //nolint:gosec // the repository's own script.
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	return string(b), time.Since(start), err
}

// TestEnvtestDownload checks that download.sh installs the pinned
// version's kube-apiserver, etcd and kubectl with setup-envtest, writes
// build.sh's stamp, and fetches nothing once they are up to date.
func TestEnvtestDownload(t *testing.T) {
	index, requests := releaseSite(t, pinnedVersion(t))
	out := filepath.Join(t.TempDir(), "k8s")
	env := []string{"SETUP_ENVTEST=" + setupEnvtest(t), "ENVTEST_INDEX=" + index, fmt.Sprintf("ENVTEST_PROBE_TIMEOUT=%d", probeTimeout)}
	if log, _, err := download(t, out, env...); err != nil {
		t.Fatalf("download.sh: %v\n%s", err, log)
	}
	for _, name := range controlPlane {
		b, err := os.ReadFile(filepath.Join(out, name)) //nolint:gosec // the test's own directory.
		if err != nil || !strings.Contains(string(b), "echo "+name) {
			t.Errorf("%s is not the archive's (%v): %q", name, err, b)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, ".stamp")); err != nil || strings.TrimSpace(string(b)) != buildStamp(t) { //nolint:gosec // the test's own directory.
		t.Errorf("stamp = %q (%v), want build.sh's %s", b, err, buildStamp(t))
	}
	before := requests.Load()
	if log, _, err := download(t, out, env...); err != nil || requests.Load() != before {
		t.Fatalf("download.sh with the control plane up to date: %v, %d requests, want none\n%s", err, requests.Load()-before, log)
	}
}

// TestEnvtestDownloadFailsFast checks that download.sh gives up within
// seconds, installing nothing, when the release index refuses connections
// or never answers.
func TestEnvtestDownloadFailsFast(t *testing.T) {
	for name, addr := range map[string]string{"refused": closedAddress(t), "silent": silentAddress(t)} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "k8s")
			// The setup-envtest named is never run: the index is probed first.
			log, took, err := download(t, out, "SETUP_ENVTEST=/nonexistent/setup-envtest",
				"ENVTEST_INDEX=http://"+addr+"/index.yaml", fmt.Sprintf("ENVTEST_PROBE_TIMEOUT=%d", probeTimeout))
			if err == nil || took > failFast {
				t.Fatalf("download.sh = %v after %v, want a failure within %v\n%s", err, took, failFast, log)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("download.sh left %d files in %s", len(entries), out)
			}
		})
	}
}

// fakeGo is a `go` command that records its arguments and, for a build,
// creates its -o file; `go list` prints version. It stands in for the
// source build, which takes minutes.
const fakeGo = `#!/bin/sh
echo "$*" >> "$FAKE_GO_LOG"
case "$1" in
  list) echo "$FAKE_GO_VERSION" ;;
  build) while [ $# -gt 0 ]; do if [ "$1" = -o ]; then printf '#!/bin/sh\nexit 1\n' > "$2"; chmod +x "$2"; fi; shift; done ;;
esac
`

// TestEnvtestBinsFallsBackToSource checks that `make envtest-bins`, when
// the release index cannot be reached, builds kube-apiserver, etcd and
// kubectl from source (with a recording go command in place of the slow
// build).
func TestEnvtestBinsFallsBackToSource(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakebin")
	if err := os.MkdirAll(fake, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "go"), []byte(fakeGo), 0o700); err != nil { //nolint:gosec // an executable script of the test's own.
		t.Fatal(err)
	}
	goLog := filepath.Join(dir, "go.log")
	bin := filepath.Join(dir, "bin")
	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", repoRoot, "envtest-bins", "BIN="+bin) //nolint:gosec // the repository's own Makefile.
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "FAKE_GO_LOG="+goLog, "FAKE_GO_VERSION="+pinnedVersion(t),
		"ENVTEST_INDEX=http://"+closedAddress(t)+"/index.yaml", fmt.Sprintf("ENVTEST_PROBE_TIMEOUT=%d", probeTimeout))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make envtest-bins: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "building from source instead") {
		t.Errorf("make envtest-bins did not say it builds from source:\n%s", out)
	}
	calls, err := os.ReadFile(goLog) //nolint:gosec // the test's own file.
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range controlPlane {
		if !strings.Contains(string(calls), "-o "+filepath.Join(bin, "k8s", name)+" ./"+name) {
			t.Errorf("go was not asked to build %s into %s:\n%s", name, filepath.Join(bin, "k8s"), calls)
		}
	}
	if !strings.Contains(string(calls), "setup-envtest") {
		t.Errorf("make envtest-bins did not build setup-envtest first:\n%s", calls)
	}
}
