package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
)

// noKubernetesConfig leaves the process without any Kubernetes
// configuration: no $KUBECONFIG, a $HOME without ~/.kube/config, and no
// in-cluster service account environment. It returns the empty home.
// client-go reads $HOME once, when its package initializes, into
// clientcmd.RecommendedHomeFile; that is pointed at the new home too.
func noKubernetesConfig(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", home)
	homeFile := clientcmd.RecommendedHomeFile
	clientcmd.RecommendedHomeFile = filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	t.Cleanup(func() { clientcmd.RecommendedHomeFile = homeFile })
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("KUBERNETES_MASTER", "")
	return home
}

// runPlugin runs the real command line (NewCommand, with kubectl's config
// flags) and returns its stderr and error.
func runPlugin(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return errOut.String(), err
}

// executePlugin runs the plugin with args as the program does (Execute)
// and returns what it printed on stderr and its exit status.
func executePlugin(args ...string) (string, int) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	status := Execute(cmd)
	return errOut.String(), status
}

// TestNoKubeconfig proves that without a kubeconfig, --server or an
// in-cluster service account every verb that needs the API server fails
// with ErrNoKubeconfig, naming KUBECONFIG and ~/.kube/config, instead of
// falling back to http://localhost:8080 (a router's front door on a GPU
// node); a $KUBECONFIG naming a missing file is no configuration either.
func TestNoKubeconfig(t *testing.T) {
	for _, tt := range []struct {
		desc       string
		kubeconfig string // $KUBECONFIG; "" for none.
		args       []string
	}{
		{desc: "status", args: []string{"status", "llama"}},
		{desc: "quiesce", args: []string{"quiesce", "llama", "--reason", "x"}},
		{desc: "mcp", args: []string{"mcp"}},
		{desc: "KUBECONFIG names a missing file", kubeconfig: "missing", args: []string{"status", "llama"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			home := noKubernetesConfig(t)
			if tt.kubeconfig != "" {
				t.Setenv("KUBECONFIG", filepath.Join(home, tt.kubeconfig))
			}
			_, err := runPlugin(tt.args...)
			if !errors.Is(err, ErrNoKubeconfig) {
				t.Fatalf("err = %v, want ErrNoKubeconfig", err)
			}
			for _, want := range []string{"KUBECONFIG", "~/.kube/config"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			// The program prints the error and fails (1: not a usage error).
			if stderr, status := executePlugin(tt.args...); status != 1 || !strings.HasPrefix(stderr, "error: no Kubernetes configuration") {
				t.Errorf("exit %d, stderr = %q, want 1 and the error", status, stderr)
			}
		})
	}
}

// TestKubeconfigInHome is the control of TestNoKubeconfig: with
// ~/.kube/config present the command reaches the API server it names.
func TestKubeconfigInHome(t *testing.T) {
	home := noKubernetesConfig(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: inference}}]
current-context: c
`, srv.URL)
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runPlugin("status", "llama")
	if err == nil || errors.Is(err, ErrNoKubeconfig) {
		t.Fatalf("err = %v, want the fake API server's answer", err)
	}
	if requests.Load() == 0 {
		t.Fatal("the API server named by ~/.kube/config was not contacted")
	}
}
