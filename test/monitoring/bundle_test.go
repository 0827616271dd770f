package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// The files of the monitoring bundle, relative to repoRoot.
const (
	dashboardFile = "config/grafana/sluice-dashboard.json"
	rulesFile     = "config/prometheus/prometheusrule.yaml"
	// datasourceUID is the data source every panel and query names: the
	// dashboard's datasource variable.
	datasourceUID = "${datasource}"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// datasourceRef is a panel's or a query's data source.
type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// panel is a dashboard panel; a row holds its collapsed panels.
type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		Datasource *datasourceRef `json:"datasource"`
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// variable is a template variable.
type variable struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Query      any            `json:"query"`
	Datasource *datasourceRef `json:"datasource"`
	Multi      bool           `json:"multi"`
	IncludeAll bool           `json:"includeAll"`
}

// rule is one rule of the PrometheusRule.
type rule struct {
	Record      string            `json:"record"`
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRule is the part of the PrometheusRule the tests read.
// Decoded strictly: a misspelt rule field fails the tests.
type prometheusRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var out []rule
	for _, g := range pr.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// allPanels returns the panels with the rows' collapsed panels, rows
// excluded.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, allPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// query is one PromQL expression of the bundle and where it is used.
type query struct {
	where, expr string
}

// dashboardQueries returns the expressions of the dashboard's panels and
// of its query variables.
func dashboardQueries(d dashboard) []query {
	var out []query
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, query{where: "panel " + p.Title + " " + tg.RefID, expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		switch q := v.Query.(type) {
		case string:
			out = append(out, query{where: "variable " + v.Name, expr: q})
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				out = append(out, query{where: "variable " + v.Name, expr: s})
			}
		}
	}
	return out
}

// ruleQueries returns the expressions of the rules.
func ruleQueries(rules []rule) []query {
	out := make([]query, 0, len(rules))
	for _, r := range rules {
		out = append(out, query{where: "rule " + r.Record + r.Alert, expr: r.Expr})
	}
	return out
}
