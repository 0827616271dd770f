package pressure_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/pressure"
)

// dialectNames returns the adapter table's engines as sorted strings.
func dialectNames() []string {
	var names []string
	for _, e := range pressure.Engines() {
		names = append(names, string(e))
	}
	return names
}

// sortedStrings returns the values' string forms, sorted.
func sortedStrings[S ~string](values []S) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		out = append(out, string(v))
	}
	slices.Sort(out)
	return out
}

// TestAPIEnginesAreTheAdapterTable ties every listing of the engine
// dialects to the adapter table: the Enum marker on the API's Engine type,
// the generated CRD's enum, the API's Engines, and what Validate accepts
// and names when it refuses. A dialect added in one place and not the
// others fails here.
func TestAPIEnginesAreTheAdapterTable(t *testing.T) {
	want := dialectNames()
	if len(want) == 0 {
		t.Fatal("the adapter table is empty")
	}

	src, err := os.ReadFile("../../api/v1alpha1/replicatier_types.go")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`(?m)^// \+kubebuilder:validation:Enum=(.*)\ntype Engine string$`).FindSubmatch(src)
	if marker == nil {
		t.Fatal("no Enum marker above type Engine")
	}
	if got := sortedStrings(strings.Split(string(marker[1]), ";")); !slices.Equal(got, want) {
		t.Errorf("Engine's Enum marker lists %v, want the adapter table's %v", got, want)
	}

	raw, err := os.ReadFile("../../config/crd/bases/sluice.dev_replicatiers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									Members struct {
										Items struct {
											Properties struct {
												Metrics struct {
													Properties struct {
														Engine struct {
															Enum []string `json:"enum"`
														} `json:"engine"`
													} `json:"properties"`
												} `json:"metrics"`
											} `json:"properties"`
										} `json:"items"`
									} `json:"members"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil || len(crd.Spec.Versions) == 0 {
		t.Fatalf("CRD: %v", err)
	}
	enum := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.Members.Items.Properties.Metrics.Properties.Engine.Enum
	if got := sortedStrings(enum); !slices.Equal(got, want) {
		t.Errorf("the CRD's engine enum is %v, want the adapter table's %v", got, want)
	}

	if got := sortedStrings(sluicev1.Engines()); !slices.Equal(got, want) {
		t.Errorf("v1alpha1.Engines() = %v, want the adapter table's %v", got, want)
	}

	base := validationtable.Base()
	for _, name := range want {
		tier := base.DeepCopy()
		tier.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{Engine: sluicev1.Engine(name)}
		if errs := sluicev1.Validate(tier); len(errs) != 0 {
			t.Errorf("engine %s: Validate = %v", name, errs)
		}
	}
	tier := base.DeepCopy()
	tier.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{Engine: "triton"}
	errs := sluicev1.Validate(tier)
	if len(errs) != 1 {
		t.Fatalf("engine triton: Validate = %v, want one error", errs)
	}
	var named []string
	for _, q := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(errs[0].Detail, -1) {
		named = append(named, q[1])
	}
	if slices.Sort(named); !slices.Equal(named, want) {
		t.Errorf("Validate refuses triton naming %v, want the adapter table's %v", named, want)
	}
}

// TestEveryDialectHasAFlavor: enginesim exposes every dialect the router
// reads, so each adapter can be run against the simulator.
func TestEveryDialectHasAFlavor(t *testing.T) {
	for _, name := range dialectNames() {
		var f enginesim.Flavor
		if err := f.Set(name); err != nil {
			t.Errorf("dialect %s has no enginesim flavor: %v", name, err)
		}
	}
}
