package monitoring

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestDashboardShape: the dashboard takes its data source from a
// datasource variable, every panel and query uses it, a multi-value tier
// variable lists the routers' tiers, panel ids are unique, and every panel
// has a query.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Errorf("datasource variable = %+v, want type datasource of prometheus", ds)
	}
	tier, ok := vars["tier"]
	if !ok || tier.Type != "query" || !tier.Multi || !tier.IncludeAll || tier.Datasource == nil || tier.Datasource.UID != datasourceUID {
		t.Errorf("tier variable = %+v, want a multi-value query of %s", tier, datasourceUID)
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
	}
	panels := allPanels(d.Panels)
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		if p.Datasource == nil || p.Datasource.UID != datasourceUID || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus %s", p.Title, p.Datasource, datasourceUID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != datasourceUID || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q query %s: datasource %+v, expr %q", p.Title, tg.RefID, tg.Datasource, tg.Expr)
			}
		}
	}
}

// TestRulesShape: the alerts are the documented six, each with a for
// duration, a severity and a summary and description; the recording rules
// follow level:metric:operation names.
func TestRulesShape(t *testing.T) {
	alerts := map[string]rule{}
	var records []string
	for _, r := range loadRules(t) {
		switch {
		case r.Alert != "":
			alerts[r.Alert] = r
		case r.Record != "":
			records = append(records, r.Record)
			if strings.Count(r.Record, ":") != 2 {
				t.Errorf("recording rule %s: want level:metric:operation", r.Record)
			}
		default:
			t.Errorf("a rule is neither an alert nor a recording rule: %+v", r)
		}
	}
	want := []string{"SluiceDecisionLogDropping", "SluiceMemberNotReady", "SluiceMemberPressureStale",
		"SluiceNoRouterOnNode", "SluiceQueueTimeouts", "SluiceTierSaturated"}
	if got := slices.Sorted(maps.Keys(alerts)); !slices.Equal(got, want) {
		t.Errorf("alerts = %q, want %q", got, want)
	}
	for name, a := range alerts {
		if a.For == "" {
			t.Errorf("%s has no for", name)
		}
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q", name, s)
		}
		if a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("%s: annotations %v lack a summary or a description", name, a.Annotations)
		}
	}
	for _, r := range []string{"tier:sluice_tier_utilisation:ratio", "tier:sluice_time_to_first_token_seconds:p95",
		"tier:sluice_inter_token_latency_seconds:p95", "tier:sluice_request_duration_seconds:p95"} {
		if !slices.Contains(records, r) {
			t.Errorf("no recording rule %s (have %q)", r, records)
		}
	}
}
