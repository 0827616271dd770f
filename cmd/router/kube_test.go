package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfig is a minimal valid kubeconfig for a server that does not exist.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestKubeRESTConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not in a pod: no service account environment.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	t.Setenv("KUBECONFIG", "")
	if c, err := kubeRESTConfig(path); err != nil || c.Host != "https://127.0.0.1:1" {
		t.Fatalf("--kubeconfig: %v, %v", c, err)
	}
	if _, err := kubeRESTConfig(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("missing --kubeconfig: %v", err)
	}
	t.Setenv("KUBECONFIG", path)
	if c, err := kubeRESTConfig(""); err != nil || c.Host != "https://127.0.0.1:1" {
		t.Fatalf("$KUBECONFIG: %v, %v", c, err)
	}
	t.Setenv("KUBECONFIG", "")
	skipIfHomeKubeconfig(t)
	if _, err := kubeRESTConfig(""); !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("nothing configured: %v, want errNoKubeconfig", err)
	}
}

// skipIfHomeKubeconfig skips a test that needs no kubeconfig at all when
// the user running the tests has ~/.kube/config (client-go resolves that
// path once, at start, so the test cannot hide it).
func skipIfHomeKubeconfig(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists; the no-configuration case cannot be tested here", clientcmd.RecommendedHomeFile)
	}
}

// TestRunWithoutAnySource proves the router refuses to start, before
// listening, when neither --tiers-dir nor a Kubernetes configuration exists.
func TestRunWithoutAnySource(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	skipIfHomeKubeconfig(t)
	err := run(context.Background(), []string{"--node-name", "n", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, io.Discard, io.Discard, nil)
	if !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("run = %v, want errNoKubeconfig", err)
	}
}
