package monitoring

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// prometheusSeries are the series Prometheus makes itself for every
// target, which no program exports.
var prometheusSeries = map[string]bool{"up": true}

// TestBundleSelectsExportedMetrics scrapes a running router (a tier
// applied, requests served) and a running manager, and fails naming every
// metric that a dashboard query, a dashboard variable or a rule selects
// and that neither exports, nor a recording rule defines. It also requires
// every dashboard query of a metric the router labels by tier to filter by
// the dashboard's tier variable.
func TestBundleSelectsExportedMetrics(t *testing.T) {
	router, err := scrape(t.Context(), "http://"+startRouter(t)+"/metrics")
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	manager, err := scrape(t.Context(), "http://"+startManager(t)+"/metrics")
	if err != nil {
		t.Fatalf("manager: %v", err)
	}

	known := map[string]bool{}
	maps.Copy(known, router.seriesNames())
	maps.Copy(known, manager.seriesNames())
	maps.Copy(known, prometheusSeries)
	rules := loadRules(t)
	for _, r := range rules {
		if r.Record != "" {
			known[r.Record] = true
		}
	}

	missing := map[string][]string{}
	queries := append(dashboardQueries(loadDashboard(t)), ruleQueries(rules)...)
	for _, q := range queries {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s selects no metric by name: %q", q.where, q.expr)
		}
		for _, n := range names {
			if !known[n] {
				missing[n] = append(missing[n], q.where)
			}
		}
	}
	if len(missing) > 0 {
		var b strings.Builder
		for _, n := range slices.Sorted(maps.Keys(missing)) {
			fmt.Fprintf(&b, "\n  %s (used by %s)", n, strings.Join(slices.Compact(missing[n]), "; "))
		}
		t.Errorf("%d metric names are selected but exported by neither the router nor the manager: %s\nmissing: %s",
			len(missing), b.String(), strings.Join(slices.Sorted(maps.Keys(missing)), " "))
	}

	tierLabelled := map[string]bool{}
	for name, f := range router {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tier" {
					tierLabelled[name] = true
				}
			}
		}
	}
	for _, q := range dashboardQueries(loadDashboard(t)) {
		if strings.HasPrefix(q.where, "variable ") {
			continue
		}
		for _, n := range metricNames(q.expr) {
			base := strings.TrimSuffix(n, "_bucket")
			if tierLabelled[base] && !strings.Contains(q.expr, `tier=~"$tier"`) {
				t.Errorf("%s selects %s, labelled by tier, without tier=~\"$tier\": %q", q.where, n, q.expr)
			}
		}
	}
}
