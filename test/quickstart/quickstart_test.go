//go:build quickstart

// Package quickstart runs the README's quick starts as written: each shell
// block that follows a `<!-- quickstart: NAME -->` comment runs in bash
// from the repository root, and must succeed and print what a reader is
// told to expect. `make test-quickstart` (part of `make test`) runs it with
// the build tag "quickstart"; the blocks use fixed loopback ports, so it
// never runs beside other tests.
package quickstart

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/test/docblock"
)

// root is the repository root, where the README's commands run.
var root = filepath.Join("..", "..")

// blocks returns the README's marked blocks by name.
func blocks(t *testing.T) map[string]string {
	t.Helper()
	out, err := docblock.Blocks(filepath.Join(root, "README.md"), "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runBlock runs script from the repository root (docblock.Run), failing
// the test when it fails or times out.
func runBlock(t *testing.T, script string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := docblock.Run(ctx, root, nil, script)
	if err != nil {
		t.Fatalf("the quick start failed: %v", err)
	}
	return out
}

// TestQuickStarts runs each quick start and checks its output.
func TestQuickStarts(t *testing.T) {
	all := blocks(t)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    []string // regular expressions the output must match
	}{
		{"demo", 15 * time.Minute, []string{`(?m)^RoundRobin`, `(?m)^Capacity`}},
		{"manager", 10 * time.Minute, []string{
			`replicatier.sluice.dev/llama-70b condition met`,
			`replicatier.sluice.dev/llama-70b patched`,
			`"id":"gpu1","quiesced":true,"reason":"maintenance"`,
		}},
		{"router", 5 * time.Minute, []string{
			`(?m)^HTTP/1\.1 200 OK`,
			`(?m)^X-Sluice-Member: gpu[0-2]`,
			`(?m)^data: \[DONE\]`,
			`"outcome":\s*"admitted"`,
			`(?m)^members: (gpu[0-2] ){5}gpu[0-2]$`,
			`(?m)^members with gpu0 quiesced: (gpu[12] ){5}gpu[12]$`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, ok := all[tc.name]
			if !ok {
				t.Fatalf("README.md has no block marked <!-- quickstart: %s -->", tc.name)
			}
			out := runBlock(t, script, tc.timeout)
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	if len(all) != 3 {
		t.Errorf("README.md marks %d quick starts, the test knows 3: %v", len(all), strings.Join(keys(all), ", "))
	}
}

// yourEngines finds the README's "Your engines" manifest: the yaml block
// after `<!-- manifest: your-engines -->`.
var yourEngines = regexp.MustCompile("(?s)<!-- manifest: your-engines -->\n```yaml\n(.*?)```")

// TestYourEnginesManifest checks that the README's manifest for a
// reader's own engines is a ReplicaTier the router accepts as written:
// strictly decoded (no unknown field), defaulted and valid, with the
// members, ceilings and engine kind the text describes.
func TestYourEnginesManifest(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md")) //nolint:gosec // the repository's own README.
	if err != nil {
		t.Fatal(err)
	}
	m := yourEngines.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no yaml block marked <!-- manifest: your-engines -->")
	}
	var tier v1alpha1.ReplicaTier
	if err := yaml.UnmarshalStrict(m[1], &tier); err != nil {
		t.Fatalf("the manifest does not decode: %v\n%s", err, m[1])
	}
	v1alpha1.Default(&tier)
	if errs := v1alpha1.Validate(&tier); len(errs) > 0 {
		t.Fatalf("the manifest is invalid: %v\n%s", errs.ToAggregate(), m[1])
	}
	if tier.Kind != "ReplicaTier" || len(tier.Spec.Members) < 2 {
		t.Fatalf("the manifest is a %s with %d members, want a ReplicaTier of several engines", tier.Kind, len(tier.Spec.Members))
	}
	for _, member := range tier.Spec.Members {
		if member.Metrics == nil || member.Metrics.Engine != "vllm" {
			t.Errorf("member %s has no vllm metrics engine: %+v", member.ID, member.Metrics)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
