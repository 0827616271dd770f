package source

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// tierDoc is a valid ReplicaTier document for node gpu-node-1.
const tierDoc = `apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: llama, namespace: inference}
spec:
  nodeName: gpu-node-1
  aliases: [llama, chat]
  servedModel: meta/llama
  strategy: Capacity
  members:
  - {id: gpu0, endpoint: "http://127.0.0.1:8001", maxConcurrency: 2, metrics: {engine: vllm}}
  - {id: gpu1, endpoint: "http://127.0.0.1:8002", maxConcurrency: 2}
  quiesce: {members: {gpu1: driver-upgrade}}
`

func TestParseManifest(t *testing.T) {
	tests := []struct {
		desc      string
		data      string
		wantKeys  []string
		wantError string // substring; empty means success
	}{
		{desc: "one document", data: tierDoc, wantKeys: []string{"inference/llama"}},
		{
			desc:     "several documents, comments and empty documents",
			data:     "# leading comment\n---\n" + tierDoc + "--- # separator comment\n" + strings.Replace(tierDoc, "name: llama,", "name: other,", 1) + "---\n# only a comment\n---\n",
			wantKeys: []string{"inference/llama", "inference/other"},
		},
		{desc: "empty file", data: "", wantKeys: nil},
		{
			desc:     "namespace defaults",
			data:     strings.Replace(tierDoc, "metadata: {name: llama, namespace: inference}", "metadata: {name: llama}", 1),
			wantKeys: []string{"default/llama"},
		},
		{
			desc:     "another node's tier is ignored even when invalid",
			data:     strings.Replace(strings.Replace(tierDoc, "gpu-node-1", "gpu-node-2", 1), "strategy: Capacity", "strategy: Bogus", 1),
			wantKeys: nil,
		},
		{
			desc:      "invalid tier rejects the file",
			data:      strings.Replace(tierDoc, "strategy: Capacity", "strategy: Bogus", 1),
			wantError: "spec.strategy: Unsupported value",
		},
		{
			desc:      "unknown field",
			data:      strings.Replace(tierDoc, "servedModel:", "servedModle:", 1),
			wantError: `unknown field "servedModle"`,
		},
		{
			desc:      "wrong kind",
			data:      strings.Replace(tierDoc, "kind: ReplicaTier", "kind: ConfigMap", 1),
			wantError: "want apiVersion sluice.dev/v1alpha1 and kind ReplicaTier",
		},
		{
			desc:      "declared twice",
			data:      tierDoc + "---\n" + tierDoc,
			wantError: "tier inference/llama is declared twice",
		},
		{
			desc:      "missing name",
			data:      strings.Replace(tierDoc, "name: llama, ", "", 1),
			wantError: "metadata.name: Required value",
		},
		{
			desc:      "invalid name",
			data:      strings.Replace(tierDoc, "name: llama,", "name: Llama_70B,", 1),
			wantError: "metadata.name",
		},
		{
			desc:      "queue maxWait not a duration",
			data:      tierDoc + "  queue: {maxRequests: 8, maxWait: soon}\n",
			wantError: `invalid duration "soon"`,
		},
		{
			desc:      "queue maxWait a bare number",
			data:      tierDoc + "  queue: {maxRequests: 8, maxWait: 30}\n",
			wantError: "document 0",
		},
		{
			desc:      "queue without maxRequests",
			data:      tierDoc + "  queue: {maxWait: 2s}\n",
			wantError: "spec.queue.maxRequests: Required value",
		},
		{
			desc:      "queue maxRequests not an integer",
			data:      tierDoc + "  queue: {maxRequests: 1.5, maxWait: 2s}\n",
			wantError: "document 0",
		},
		{
			desc:      "queue with an unknown field",
			data:      tierDoc + "  queue: {maxRequests: 8, maxWait: 2s, priority: 1}\n",
			wantError: `unknown field "priority"`,
		},
		{desc: "not YAML", data: "spec: [\n", wantError: "document 0"},
		{desc: "bad separator", data: tierDoc + "--- junk\n" + tierDoc, wantError: "invalid Yaml document separator"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := parseManifest([]byte(tt.data), "gpu-node-1")
			if tt.wantError != "" {
				if !errors.Is(err, ErrInvalidManifest) || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want ErrInvalidManifest containing %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			var keys []string
			for _, tier := range m.tiers {
				keys = append(keys, tier.Namespace+"/"+tier.Name)
			}
			if strings.Join(keys, ",") != strings.Join(tt.wantKeys, ",") {
				t.Fatalf("keys = %v, want %v", keys, tt.wantKeys)
			}
		})
	}
}

func TestParseManifestDefaultsAndIntent(t *testing.T) {
	m, err := parseManifest([]byte(tierDoc), "gpu-node-1")
	tiers := m.tiers
	if err != nil || len(tiers) != 1 {
		t.Fatalf("parseManifest = %v, %v", tiers, err)
	}
	s := tiers[0].Spec
	if s.Upstream.ResponseHeaderTimeout.Duration != v1alpha1.DefaultResponseHeaderTimeout ||
		s.Upstream.IdleTimeout.Duration != v1alpha1.DefaultIdleTimeout {
		t.Errorf("upstream = %+v, want the CRD defaults", s.Upstream)
	}
	if s.Members[0].Metrics.Path != v1alpha1.DefaultMetricsPath {
		t.Errorf("metrics path = %q, want the default", s.Members[0].Metrics.Path)
	}
	if s.Quiesce.Members["gpu1"] != "driver-upgrade" {
		t.Errorf("quiesce = %+v, want gpu1 quiesced", s.Quiesce)
	}
	explicit := strings.Replace(tierDoc, "  quiesce:", "  upstream: {responseHeaderTimeout: 5s, idleTimeout: 2s}\n  quiesce:", 1)
	m, err = parseManifest([]byte(explicit), "gpu-node-1")
	tiers = m.tiers
	if err != nil {
		t.Fatal(err)
	}
	if got := tiers[0].Spec.Upstream.IdleTimeout.Duration; got != 2*time.Second {
		t.Errorf("idle timeout = %v, want 2s", got)
	}
}

// TestParseManifestQueue proves the files source carries spec.queue as
// written, and that a tier without one gets none: no default invents a
// queue.
func TestParseManifestQueue(t *testing.T) {
	m, err := parseManifest([]byte(tierDoc), "gpu-node-1")
	tiers := m.tiers
	if err != nil || len(tiers) != 1 {
		t.Fatalf("parseManifest = %v, %v", tiers, err)
	}
	if q := tiers[0].Spec.Queue; q != nil {
		t.Fatalf("a tier without spec.queue has queue %+v", q)
	}
	withQueue := tierDoc + "  queue: {maxRequests: 64, maxWait: 1m30s, maxRequestsPerTenant: 16}\n"
	m, err = parseManifest([]byte(withQueue), "gpu-node-1")
	tiers = m.tiers
	if err != nil || len(tiers) != 1 {
		t.Fatalf("parseManifest = %v, %v", tiers, err)
	}
	q := tiers[0].Spec.Queue
	if q == nil || q.MaxRequests != 64 || q.MaxWait == nil || q.MaxWait.Duration != 90*time.Second ||
		q.MaxRequestsPerTenant == nil || *q.MaxRequestsPerTenant != 16 {
		t.Fatalf("queue = %+v, want 64 requests, 1m30s, 16 per tenant", q)
	}
}

// TestParseManifestQuotesNoValues proves a rejected endpoint is not echoed:
// it could carry credentials.
func TestParseManifestQuotesNoValues(t *testing.T) {
	data := strings.Replace(tierDoc, "http://127.0.0.1:8001", "http://admin:s3cret-marker@127.0.0.1:8001/?token=tok-marker", 1)
	_, err := parseManifest([]byte(data), "gpu-node-1")
	if err == nil {
		t.Fatal("an endpoint with user info was accepted")
	}
	for _, marker := range []string{"s3cret-marker", "tok-marker", "admin:"} {
		if strings.Contains(err.Error(), marker) {
			t.Errorf("error %q quotes %q", err, marker)
		}
	}
}

func TestDescribeBoundsErrors(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: big}\nspec:\n  nodeName: gpu-node-1\n  aliases: [a]\n  servedModel: m\n  members:\n")
	for range 12 {
		doc.WriteString("  - {id: BAD, endpoint: \"ftp://x\"}\n")
	}
	_, err := parseManifest([]byte(doc.String()), "gpu-node-1")
	if err == nil || !strings.Contains(err.Error(), "more") {
		t.Fatalf("err = %v, want a bounded list ending in \"and N more\"", err)
	}
	if len(message(err)) > maxMessageLength+len("…") {
		t.Fatalf("message is %d bytes, want at most %d", len(message(err)), maxMessageLength)
	}
}
