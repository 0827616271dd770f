package install

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// gieModule is the Gateway API Inference Extension release the
// config/inferencepool overlay is written for (docs/INSTALL.md#many-nodes).
const gieModule = "sigs.k8s.io/gateway-api-inference-extension@v1.5.0"

// TestInferencePoolOverlayApplies installs the CRDs of gieModule, from the
// pinned module, on a real API server and applies config/inferencepool
// there, as docs/INSTALL.md#many-nodes does: the InferencePool passes the
// CRD's schema and validation rules, and the picker's objects the API
// server's own validation. test/helm checks what the overlay says.
func TestInferencePoolOverlayApplies(t *testing.T) {
	crds := filepath.Join(gieModuleDir(t), "config", "crd", "bases")
	objs := render(t, "inferencepool")
	c := startCluster(t)
	c.run(t, "apply", "--server-side", "-f", crds)
	c.run(t, "wait", "--for=condition=Established", "crd/inferencepools.inference.networking.k8s.io", "--timeout=30s")
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			c.run(t, "create", "namespace", u.GetName())
		}
	}
	c.run(t, "apply", "--server-side", "-k", "config/inferencepool")
	for _, u := range objs {
		if u.GetNamespace() == "" {
			continue
		}
		c.run(t, "get", "-n", u.GetNamespace(), u.GetKind()+"."+u.GroupVersionKind().Group, u.GetName())
	}
}

// gieModuleDir returns the directory of gieModule in the module cache,
// which `go mod download` fills from the Go module proxy when it lacks it.
func gieModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", gieModule)
	cmd.Dir = t.TempDir() // outside the repository's module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v: %s%s", gieModule, err, out, stderr.String())
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", gieModule, out, err)
	}
	return mod.Dir
}
