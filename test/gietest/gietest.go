// Package gietest gives tests the Gateway API Inference Extension's
// module at the one version the project pins, hack/gie/go.mod's: its
// charts, CRDs and documents, read from the Go module cache.
package gietest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Module is the Gateway API Inference Extension's module path.
const Module = "sigs.k8s.io/gateway-api-inference-extension"

// ModuleDir returns the directory of Module, at the version hack/gie/go.mod
// requires, in the module cache; `go mod download` fills the cache from
// the Go module proxy when it lacks it. The directory is read-only.
func ModuleDir(t testing.TB) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("gietest: no source path")
	}
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", Module)
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..", "hack", "gie")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s (hack/gie): %v: %s%s", Module, err, out, stderr.String())
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s (hack/gie): no directory in %s (%v)", Module, out, err)
	}
	return mod.Dir
}
