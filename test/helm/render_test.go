package helm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

const (
	// chartDir is the chart, relative to repoRoot.
	chartDir = "charts/sluice"
	// releaseNamespace is where the tests install the chart, the namespace
	// config/default gives the manager.
	releaseNamespace = "sluice-system"
)

// helmPath returns the helm that `make bin/helm` builds, failing the test
// when it is missing.
func helmPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(repoRoot, "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm is missing (%v): run `make bin/helm`", err)
	}
	return p
}

// runHelm runs helm args in the repository root, with its configuration,
// cache and data directories in a temporary directory and no kubeconfig, and
// returns stdout; err carries stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helmPath(t), args...) //nolint:gosec // the repository's pinned helm with the test's own arguments.
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(err.Error() + ": " + stderr.String())
	}
	return stdout.String(), nil
}

// template renders the chart as release "sluice" in releaseNamespace, with
// the CRD, and extra arguments (--values, --set ...).
func template(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "sluice", chartDir, "-n", releaseNamespace, "--include-crds"}, extra...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", extra, err)
	}
	return decode(t, out)
}

// templateError renders the chart with extra arguments and returns helm's
// error, failing the test when it renders.
func templateError(t *testing.T, extra ...string) string {
	t.Helper()
	_, err := runHelm(t, append([]string{"template", "sluice", chartDir, "-n", releaseNamespace}, extra...)...)
	if err == nil {
		t.Fatalf("helm template %v rendered, want an error", extra)
	}
	return err.Error()
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if s := string(bytes.TrimSpace(js)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		out = append(out, u)
	}
}

// renderKustomization builds config/<dir> as `kubectl kustomize` does.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON, so that numbers have the types helm's render has.
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// objectKey names an object as Kind/namespace/name (namespace empty for
// cluster-scoped objects).
func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// find returns the object of kind, namespace and name, or nil.
func find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
			return u
		}
	}
	return nil
}

// typed converts the object of kind, namespace and name, failing the test
// when it is not rendered.
func typed[T any, P interface {
	*T
	runtime.Object
}](t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) P {
	t.Helper()
	u := find(objs, kind, namespace, name)
	if u == nil {
		t.Fatalf("no %s %s/%s rendered", kind, namespace, name)
	}
	return convert[T, P](t, u)
}

// convert converts an object to its typed form.
func convert[T any, P interface {
	*T
	runtime.Object
}](t *testing.T, u *unstructured.Unstructured) P {
	t.Helper()
	out := P(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s: %v", objectKey(u), err)
	}
	return out
}
