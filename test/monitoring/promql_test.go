package monitoring

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// PromQL lexing for metric names. The project keeps Prometheus' own parser
// out of its module (it brings the server's dependency graph), so names are
// found lexically: strings, label matchers, ranges and grouping label lists
// are removed, and what is left of each identifier is a metric name unless
// it calls something (a function or an aggregation) or is a keyword.
var (
	// promqlStrings are double-, single- and back-quoted strings.
	promqlStrings = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// promqlLabelLists are the label lists of grouping and vector matching.
	promqlLabelLists = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// promqlBraces are label matchers; promqlBrackets ranges and subqueries.
	promqlBraces   = regexp.MustCompile(`\{[^}]*\}`)
	promqlBrackets = regexp.MustCompile(`\[[^\]]*\]`)
	// grafanaVariables are Grafana's $name and ${name...} references.
	grafanaVariables = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	// promqlTokens are numbers (and durations), which start with a digit,
	// and identifiers.
	promqlTokens = regexp.MustCompile(`[0-9][0-9A-Za-z_.]*|[A-Za-z_:][A-Za-z0-9_:]*`)
	// labelValues is Grafana's label_values(SELECTOR, LABEL) variable query.
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
)

// promqlKeywords are the identifiers of PromQL's grammar that name no
// metric.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
	"atan2": true, "start": true, "end": true, "step": true,
}

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values query) selects, sorted and without duplicates. Grafana
// variables are removed first.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = grafanaVariables.ReplaceAllString(s, "")
	s = promqlLabelLists.ReplaceAllString(s, " ")
	s = promqlBraces.ReplaceAllString(s, " ")
	s = promqlBrackets.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, loc := range promqlTokens.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if tok[0] >= '0' && tok[0] <= '9' || promqlKeywords[strings.ToLower(tok)] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		seen[tok] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (tier, le) (rate(a_bucket{job="x",tier=~"$tier"}[$__rate_interval]))`, []string{"a_bucket"}},
		{`histogram_quantile(0.95, sum(rate(a_bucket[5m])) by (le))`, []string{"a_bucket"}},
		{`b / ignoring (member) group_left () sum by (tier) (c)`, []string{"b", "c"}},
		{`x == 0 and on (tier, member) y unless z offset 5m`, []string{"x", "y", "z"}},
		{`tier:a:ratio{tier=~"$tier"} / 1e6 * 2.5`, []string{"tier:a:ratio"}},
		{`absent(up{job="r", le="not_a_metric"} == 1)`, []string{"up"}},
		{`sum without (freshness) (f{freshness="fresh"}) >= bool 1`, []string{"f"}},
		{`max_over_time(g[1h:1m]) or vector(0)`, []string{"g"}},
		{`label_values(h{job="r"}, tier)`, []string{"h"}},
		{`{__name__="only_by_name"}`, []string{}},
		{"count(m{a='q(u)o',b=\"x\\\"y\"})", []string{"m"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}
