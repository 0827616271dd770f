package sourcetest

import (
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// TestTier: the tier carries its key's namespace and name, its file, the
// members in order with a ceiling only where one is given, each mutation,
// and the defaults of a ReplicaTier.
func TestTier(t *testing.T) {
	tierMax := int32(3)
	got := Tier("ns/llama", []string{"llama"}, "", []Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:1", Max: 2}, {ID: "gpu1", Endpoint: "http://127.0.0.1:2"}},
		func(s *v1alpha1.ReplicaTierSpec) { s.MaxConcurrency = &tierMax })
	if got.Key != "ns/llama" || got.Namespace != "ns" || got.Name != "llama" || got.File != "llama.yaml" {
		t.Errorf("identity = %q %q %q %q", got.Key, got.Namespace, got.Name, got.File)
	}
	spec := got.Spec
	if spec.NodeName != "gpu-node-1" || spec.ServedModel != "served/model" || len(spec.Aliases) != 1 || spec.Aliases[0] != "llama" {
		t.Errorf("spec = %+v", spec)
	}
	if spec.Upstream == nil || spec.Upstream.ResponseHeaderTimeout == nil || spec.Upstream.IdleTimeout == nil {
		t.Errorf("upstream = %+v, want the default timeouts", spec.Upstream)
	}
	if spec.MaxConcurrency == nil || *spec.MaxConcurrency != 3 {
		t.Errorf("tier maxConcurrency = %v, want 3", spec.MaxConcurrency)
	}
	if len(spec.Members) != 2 || spec.Members[0].ID != "gpu0" || spec.Members[1].ID != "gpu1" {
		t.Fatalf("members = %+v", spec.Members)
	}
	if m := spec.Members[0].MaxConcurrency; m == nil || *m != 2 {
		t.Errorf("gpu0 maxConcurrency = %v, want 2", m)
	}
	if m := spec.Members[1].MaxConcurrency; m != nil {
		t.Errorf("gpu1 maxConcurrency = %d, want unset", *m)
	}
	if s := Snapshot(got); len(s.Tiers) != 1 || s.Tiers[0].Key != "ns/llama" || len(s.Rejected) != 0 {
		t.Errorf("snapshot = %+v", s)
	}
}
