package install

import (
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/test/gietest"
)

// TestInferencePoolOverlayApplies installs the CRDs of the Gateway API
// Inference Extension, from its pinned module (gietest), on a real API server and applies config/inferencepool
// there, as docs/INSTALL.md#many-nodes does: the InferencePool passes the
// CRD's schema and validation rules, and the picker's objects the API
// server's own validation. test/helm checks what the overlay says.
func TestInferencePoolOverlayApplies(t *testing.T) {
	crds := filepath.Join(gietest.ModuleDir(t), "config", "crd", "bases")
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
