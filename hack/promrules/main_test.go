package main

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		in      string
		want    string
		wantErr error
	}{{
		desc: "the groups, unchanged, as a rule file",
		in: `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: x, namespace: y}
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: up == 0
      for: 5m
      labels: {severity: warning}
      annotations: {summary: '{{ $labels.node }} down'}
`,
		want: `groups:
- name: g
  rules:
  - alert: A
    expr: up == 0
    for: 5m
    labels: {severity: warning}
    annotations: {summary: '{{ $labels.node }} down'}
`,
	}, {
		desc:    "another kind",
		in:      "apiVersion: v1\nkind: ConfigMap\nspec: {groups: [{name: g}]}\n",
		wantErr: errNotPrometheusRule,
	}, {
		desc:    "no groups",
		in:      "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec: {}\n",
		wantErr: errNoGroups,
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := extract([]byte(tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			var gotV, wantV any
			if err := yaml.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(tc.want), &wantV); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotV, wantV) {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestExtractShippedRules: the shipped PrometheusRule yields a rule file.
func TestExtractShippedRules(t *testing.T) {
	raw, err := os.ReadFile("../../config/prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := extract(raw)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(out, &f); err != nil || len(f.Groups) != 2 {
		t.Fatalf("rule file %v: %s", err, out)
	}
}
