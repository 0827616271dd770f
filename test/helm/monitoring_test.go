package helm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTemplateMonitoringIsConfigPrometheus: with the default values and the
// three monitoring objects enabled, the chart renders the specs of
// config/prometheus (the bundle `kubectl apply -k config/prometheus`
// installs): the router's PodMonitor, the manager's secure ServiceMonitor
// and the PrometheusRule.
func TestTemplateMonitoringIsConfigPrometheus(t *testing.T) {
	chart := index(template(t, "--set", "monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true"))
	config := index(renderKustomization(t, "prometheus"))
	for _, key := range []string{"PodMonitor/sluice-router/sluice-router", "ServiceMonitor/sluice-system/sluice-manager-metrics",
		"PrometheusRule/sluice-system/sluice"} {
		c, k := chart[key], config[key]
		if c == nil || k == nil {
			t.Errorf("%s: rendered by the chart %t, by config/prometheus %t", key, c != nil, k != nil)
			continue
		}
		cs, _, _ := unstructured.NestedMap(c.Object, "spec")
		ks, _, _ := unstructured.NestedMap(k.Object, "spec")
		if !equality.Semantic.DeepEqual(cs, ks) {
			t.Errorf("%s: the chart's spec\n%s\ndiffers from config/prometheus'\n%s", key, mustJSON(t, cs), mustJSON(t, ks))
		}
	}
	if len(config) != 3 {
		t.Errorf("config/prometheus renders %d objects, want 3", len(config))
	}
}

// TestChartRulesAreConfigRules requires the chart's copy of the
// PrometheusRule to be config/prometheus/prometheusrule.yaml byte for byte
// (`make manifests` copies it).
func TestChartRulesAreConfigRules(t *testing.T) {
	const name = "prometheusrule.yaml"
	want, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", name))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "files", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s/files/%s differs from config/prometheus/%s: run `make manifests`", chartDir, name, name)
	}
}
