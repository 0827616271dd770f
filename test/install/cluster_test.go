package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// auditPolicy logs every request at the Metadata level: who, which verb on
// which resource, and the authorization decision in the annotations.
// RequestReceived is left out: it is logged before authorization.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// assetsDir is where `make envtest-bins` puts kube-apiserver, etcd and
// kubectl.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	// Absolute: kubectl runs with the repository root as its directory.
	dir, err := filepath.Abs(filepath.Join(repoRoot, "bin", "k8s"))
	if err != nil {
		return filepath.Join(repoRoot, "bin", "k8s")
	}
	return dir
}

// cluster is the test's own control plane: an API server with RBAC and an
// audit log, no CRDs and no controllers.
type cluster struct {
	env      *envtest.Environment
	auditLog string
	// admin is a system:masters user; adminKubeconfig is its kubeconfig
	// file, adminConfig its rest configuration, and k8s a client for it.
	adminKubeconfig string
	adminConfig     *rest.Config
	k8s             client.Client
	kubectl         string
	dir             string
}

// startCluster starts kube-apiserver and etcd with audit logging to a file
// in a temporary directory and stops them when the test ends.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	assets := assetsDir()
	kubectl := filepath.Join(assets, "kubectl")
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Fatalf("%s missing in %s: run `make envtest-bins` or set KUBEBUILDER_ASSETS", bin, assets)
		}
	}
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{auditLog: filepath.Join(dir, "audit.log"), kubectl: kubectl, dir: dir}
	c.env = &envtest.Environment{BinaryAssetsDirectory: assets}
	// blocking-strict writes each event before the API server answers, so
	// the log holds every request a process saw answered.
	c.env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", c.auditLog).
		Set("audit-log-mode", "blocking-strict")
	if _, err := c.env.Start(); err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	admin, err := c.env.AddUser(envtest.User{Name: "install-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add admin user: %v", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(c.adminKubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	c.adminConfig = admin.Config()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sluicev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if c.k8s, err = client.New(c.adminConfig, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return c
}

// kubectlTimeout bounds one kubectl call.
const kubectlTimeout = time.Minute

// run runs the real kubectl as the admin and returns stdout, or fails the
// test with stderr.
func (c *cluster) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.adminKubeconfig}, args...)...) //nolint:gosec // the test's own kubectl arguments.
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// serviceAccountKubeconfig writes a kubeconfig that acts as the
// ServiceAccount namespace/name by impersonation, with the groups the API
// server gives a ServiceAccount's token and the user extras in extra (nil:
// none), and returns its path.
func (c *cluster) serviceAccountKubeconfig(t *testing.T, namespace, name string, extra map[string][]string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(c.adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = serviceAccountUser(namespace, name)
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
		ai.ImpersonateUserExtra = extra
	}
	path := filepath.Join(c.dir, namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountUser is the user name of a ServiceAccount.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// render builds a kustomization of the repository's config directory, as
// `kubectl kustomize config/<dir>` does, and returns its objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", dir))
	if err != nil {
		t.Fatalf("kustomize config/%s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// find returns the rendered object of kind and name, failing the test when
// there is none.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("the rendered manifests have no %s %s", kind, name)
	return nil
}

// buildBinaries builds the repository's commands into dir with one go
// build and returns their paths by package directory name. They are built
// without the race detector: this package checks what the programs ask of
// the API server, test/e2e and test/envtest run them for races, and a race
// build would double the test's time.
func buildBinaries(dir string, pkgs ...string) (map[string]string, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range pkgs {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...) //nolint:gosec,noctx // building the repository's own commands.
	cmd.Dir = repoRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, &buildError{err: err, out: out.String()}
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		bins[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return bins, nil
}

// buildError is a failed go build with its output.
type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }
