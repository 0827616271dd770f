package source

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// TestParseManifestTable runs the shared validation table through the files
// source: each row's object is written as a manifest, and the file must be
// accepted when the row is valid and rejected, with every expected field
// path and message, when it is not. The same rows run against
// v1alpha1.Validate (TestValidateTable) and the API server (test/envtest).
func TestParseManifestTable(t *testing.T) {
	for _, row := range validationtable.Rows() {
		t.Run(row.Desc, func(t *testing.T) {
			obj := validationtable.Base()
			row.Mutate(obj)
			obj.APIVersion, obj.Kind = v1alpha1.GroupVersion.String(), "ReplicaTier"
			data, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			// The manifest's own node: a document of another node is not
			// validated, and one row empties the node name.
			m, err := parseManifest(data, obj.Spec.NodeName)
			tiers := m.tiers
			if len(row.WantErrors) == 0 {
				if err != nil || len(tiers) != 1 {
					t.Fatalf("valid manifest: %d tiers, %v", len(tiers), err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("invalid manifest: err = %v, want ErrInvalidManifest containing %q", err, row.WantErrors)
			}
			for _, want := range row.WantErrors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
