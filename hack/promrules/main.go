// Command promrules writes the rule groups of a PrometheusRule manifest
// (spec.groups) as a plain Prometheus rule file, the form promtool reads:
//
//	promrules config/prometheus/prometheusrule.yaml out/monitoring/rules.yaml
//
// The PrometheusRule is the rules' one source; `make test-monitoring` runs
// promtool on what this writes. It refuses any other kind and a manifest
// without groups, and writes the groups unchanged.
package main

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// The errors of extract.
var (
	errNotPrometheusRule = errors.New("promrules: not a monitoring.coreos.com/v1 PrometheusRule")
	errNoGroups          = errors.New("promrules: spec.groups is empty")
)

// manifest is the part of a PrometheusRule promrules reads. The groups stay
// untyped so that every field reaches promtool as written.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Groups []any `json:"groups"`
	} `json:"spec"`
}

// extract returns the rule file of a PrometheusRule manifest.
func extract(raw []byte) ([]byte, error) {
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("promrules: %w", err)
	}
	if m.APIVersion != "monitoring.coreos.com/v1" || m.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%w: apiVersion %q, kind %q", errNotPrometheusRule, m.APIVersion, m.Kind)
	}
	if len(m.Spec.Groups) == 0 {
		return nil, errNoGroups
	}
	return yaml.Marshal(map[string]any{"groups": m.Spec.Groups})
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: promrules PROMETHEUSRULE.yaml RULES.yaml")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := extract(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[2], out, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
