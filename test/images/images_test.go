//go:build images

// Package images runs the container images `make images-offline` builds the
// way a cluster runs them: as user 47813, with a read-only root filesystem,
// no capabilities and no privilege escalation. The router image serves a
// streaming request from the enginesim image, the manager image accepts a
// ReplicaTier on a real API server, and each image prints the version and
// revision it was built from. `make test-images` builds the images and runs
// this package with the variables below; it has the build tag "images" so
// that `go test ./...` does not run it without images.
package images

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The variables `make test-images` sets.
var (
	imgManager   = mustEnv("IMG_MANAGER")
	imgRouter    = mustEnv("IMG_ROUTER")
	imgEnginesim = mustEnv("IMG_ENGINESIM")
	imgQualify   = mustEnv("IMG_QUALIFY")
	wantVersion  = mustEnv("VERSION")
	wantRevision = mustEnv("REVISION")
	tool         = mustEnv("CONTAINER_TOOL")
	// runFlags are the container tool's flags for this machine (a runtime,
	// ulimits); they may be empty.
	runFlags = strings.Fields(os.Getenv("CONTAINER_RUN_FLAGS"))
)

// unprivileged are the run flags of every container here: what the
// manifests set in the pod and container securityContext.
var unprivileged = []string{
	"--network", "host", "--read-only", "--cap-drop", "ALL",
	"--security-opt", "no-new-privileges", "--user", "47813:47813",
}

// failSafe bounds every wait; a test that needs it has failed.
const failSafe = 60 * time.Second

func mustEnv(name string) string {
	v := os.Getenv(name)
	if v == "" {
		fmt.Fprintf(os.Stderr, "images tests: $%s is not set; run them with `make test-images`\n", name)
		os.Exit(2)
	}
	return v
}

// containerTool runs the container tool with args and returns its stdout.
func containerTool(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, args...) //nolint:gosec // the test drives the container tool it was given.
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// run runs image with args in the foreground and returns its stdout.
func run(ctx context.Context, t *testing.T, image string, args ...string) string {
	t.Helper()
	all := append(append(append([]string{"run", "--rm"}, runFlags...), unprivileged...), image)
	return containerTool(ctx, t, append(all, args...)...)
}

// start starts image with args in the background under a unique name and
// removes the container when the test ends, printing its log if it failed.
func start(t *testing.T, name, image string, mounts []string, args ...string) {
	t.Helper()
	name = fmt.Sprintf("sluice-test-%s-%d", name, time.Now().UnixNano())
	all := append(append([]string{"run", "-d", "--name", name}, runFlags...), unprivileged...)
	for _, m := range mounts {
		all = append(all, "-v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	containerTool(ctx, t, append(append(all, image), args...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), failSafe)
		defer cancel()
		if t.Failed() {
			logs, _ := exec.CommandContext(ctx, tool, "logs", name).CombinedOutput() //nolint:gosec // see containerTool.
			t.Logf("%s log:\n%s", name, logs)
		}
		_ = exec.CommandContext(ctx, tool, "rm", "-f", "-t", "5", name).Run() //nolint:gosec // see containerTool.
	})
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// sharedDir is a temporary directory the containers' user can read: the
// test's own directories are private to root.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // read by the unprivileged container user.
		t.Fatal(err)
	}
	return dir
}

// writeShared writes a file the containers' user can read.
func writeShared(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil { //nolint:gosec // see sharedDir.
		t.Fatal(err)
	}
}

// await polls ok every 100 ms until it is true, failing t after failSafe:
// the containers start asynchronously and offer nothing to wait on but
// their endpoints.
func await(t *testing.T, what string, ok func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, failSafe, true,
		func(context.Context) (bool, error) { return ok(), nil })
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, failSafe, err)
	}
}

// get returns the status and body of a GET, or 0 when it fails.
func get(url string, header ...string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestVersion: every image prints the version and revision it was built
// from, as its program's --version.
func TestVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	for program, image := range map[string]string{
		"manager": imgManager, "router": imgRouter, "enginesim": imgEnginesim, "sluice-qualify": imgQualify,
	} {
		out := run(ctx, t, image, "--version")
		want := fmt.Sprintf("%s %s (revision %s, ", program, wantVersion, wantRevision)
		if !strings.HasPrefix(out, want) {
			t.Errorf("%s --version printed %q, want it to start with %q", image, out, want)
		}
	}
}

// TestImageConfig: every image runs as 47813 by default and carries the
// OCI labels of its source, version and revision.
func TestImageConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	for _, image := range []string{imgManager, imgRouter, imgEnginesim, imgQualify} {
		var inspected []struct {
			Config struct {
				User       string
				Entrypoint []string
				Labels     map[string]string
			}
		}
		if err := json.Unmarshal([]byte(containerTool(ctx, t, "image", "inspect", image)), &inspected); err != nil || len(inspected) != 1 {
			t.Fatalf("inspect %s: %v", image, err)
		}
		c := inspected[0].Config
		if c.User != "47813:47813" {
			t.Errorf("%s: user %q, want 47813:47813", image, c.User)
		}
		if len(c.Entrypoint) != 1 {
			t.Errorf("%s: entrypoint %q, want the program alone", image, c.Entrypoint)
		}
		for label, want := range map[string]string{
			"org.opencontainers.image.source":   "https://github.com/sluice-dev/sluice",
			"org.opencontainers.image.version":  wantVersion,
			"org.opencontainers.image.revision": wantRevision,
		} {
			if got := c.Labels[label]; got != want {
				t.Errorf("%s: label %s = %q, want %q", image, label, got, want)
			}
		}
	}
}

// enginesim's bodies differ between two identical requests only in the
// response id's counter and the creation time (docs/ENGINESIM.md).
var (
	generatedID = regexp.MustCompile(`(chatcmpl-enginesim-)[0-9]+`)
	created     = regexp.MustCompile(`"created":[0-9]+`)
)

// memberReady matches a ready member in the admin capacity document.
var memberReady = regexp.MustCompile(`"ready":\s*true`)

func normalize(body []byte) []byte {
	return created.ReplaceAll(generatedID.ReplaceAll(body, []byte("${1}N")), []byte(`"created":0`))
}

// TestRouterImageServesEngineImage runs the enginesim image as a member
// and the router image in files mode in front of it, both unprivileged with
// read-only root filesystems, and checks that a streaming chat completion
// sent to the router with an API key comes back with the engine's bytes
// (the same as sent to the engine directly, ids and times aside).
func TestRouterImageServesEngineImage(t *testing.T) {
	enginePort, frontPort, adminPort := freePort(t), freePort(t), freePort(t)
	start(t, "engine", imgEnginesim, nil, "--listen=127.0.0.1:"+enginePort, "--model=served-model",
		"--ttft-base=5ms", "--itl-base=1ms")

	tiers, secrets := sharedDir(t), sharedDir(t)
	writeShared(t, tiers, "tier.yaml", `apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: images, namespace: default}
spec:
  nodeName: image-node
  aliases: [chat]
  servedModel: served-model
  members:
  - {id: sim0, endpoint: "http://127.0.0.1:`+enginePort+`", maxConcurrency: 2, metrics: {engine: vllm}}
`)
	writeShared(t, secrets, "keys", "image-test-key\n")
	writeShared(t, secrets, "token", "image-test-admin\n")
	start(t, "router", imgRouter, []string{tiers + ":/etc/sluice/tiers:ro", secrets + ":/etc/sluice/secrets:ro"},
		"--tiers-dir=/etc/sluice/tiers", "--node-name=image-node",
		"--listen=127.0.0.1:"+frontPort, "--admin-listen=127.0.0.1:"+adminPort,
		"--api-keys-file=/etc/sluice/secrets/keys", "--admin-token-file=/etc/sluice/secrets/token")

	admin := "http://127.0.0.1:" + adminPort
	await(t, "router ready", func() bool { code, _ := get(admin + "/readyz"); return code == http.StatusOK })
	await(t, "member sim0 ready", func() bool {
		_, body := get(admin+"/admin/v1/capacity", "Authorization", "Bearer image-test-admin")
		return memberReady.MatchString(body)
	})

	const request = `{"model":"%s","messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true}`
	direct := post(t, "http://127.0.0.1:"+enginePort, fmt.Sprintf(request, "served-model"), "")
	routed := post(t, "http://127.0.0.1:"+frontPort, fmt.Sprintf(request, "chat"), "image-test-key")
	if !bytes.HasSuffix(routed, []byte("data: [DONE]\n\n")) {
		t.Fatalf("routed stream does not end with [DONE]:\n%s", routed)
	}
	if !bytes.Equal(normalize(direct), normalize(routed)) {
		t.Fatalf("routed bytes differ from the engine's:\ndirect: %q\nrouted: %q", direct, routed)
	}
	if code, _ := get("http://127.0.0.1:"+frontPort+"/v1/models", "Authorization", "Bearer wrong"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong API key got %d, want 401", code)
	}
}

// post sends a streaming chat completion to base and returns the body of a
// 200 text/event-stream response.
func post(t *testing.T, base, body, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s\n%s", base, resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	return out
}
