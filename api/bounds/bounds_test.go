package bounds_test

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/bounds"
	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// memberIDs are member ids around every edge of the grammar.
var memberIDs = []string{
	"a", "0", "gpu0", "gpu-0", "a-b-c", strings.Repeat("a", bounds.MaxMemberIDLength),
	"a" + strings.Repeat("-", bounds.MaxMemberIDLength-2) + "z",
	"", "-", "-a", "a-", "A", "gpu_0", "gpu.0", "gpü", "gpu 0", "gpu0\n",
	strings.Repeat("a", bounds.MaxMemberIDLength+1),
}

// TestValidMemberIDIsThePattern proves the regular-expression-free check
// accepts exactly what MemberIDPattern matches.
func TestValidMemberIDIsThePattern(t *testing.T) {
	re := regexp.MustCompile(bounds.MemberIDPattern)
	for _, id := range memberIDs {
		if got, want := bounds.ValidMemberID(id), re.MatchString(id); got != want {
			t.Errorf("ValidMemberID(%q) = %t, the pattern says %t", id, got, want)
		}
	}
}

// TestEveryCheckerAgrees proves the API's validation, the scheduler and the
// evidence parser accept exactly the same member ids and tier sizes: a
// second copy of a bound that drifts fails here.
func TestEveryCheckerAgrees(t *testing.T) {
	for _, id := range memberIDs {
		want := bounds.ValidMemberID(id)

		tier := validationtable.Base()
		tier.Spec.Members[0].ID = id
		if apiOK := !hasErrorAt(sluicev1.Validate(tier).ToAggregate(), "spec.members[0].id"); apiOK != want {
			t.Errorf("API validation of member id %q: accepted %t, want %t", id, apiOK, want)
		}

		membership := []string{id, "zzz"}
		if id > "zzz" {
			membership = []string{"zzz", id}
		}
		_, err := scheduler.Rank(membership, 0, []scheduler.Candidate{candidate(id), candidate("zzz")})
		if rankOK := err == nil; rankOK != want && id != "zzz" {
			t.Errorf("scheduler.Rank with member id %q: accepted %t, want %t (%v)", id, rankOK, want, err)
		}

		if evOK := parsesWithMember(t, id); evOK != want {
			t.Errorf("evidence.ParseRecord with member id %q: accepted %t, want %t", id, evOK, want)
		}
	}

	for _, n := range []int{bounds.MaxMembers, bounds.MaxMembers + 1} {
		want := n <= bounds.MaxMembers
		tier := validationtable.Base()
		tier.Spec.Members = nil
		ids := make([]string, n)
		cands := make([]scheduler.Candidate, n)
		for i := range n {
			ids[i] = fmt.Sprintf("m%02d", i)
			cands[i] = candidate(ids[i])
			tier.Spec.Members = append(tier.Spec.Members, sluicev1.Member{ID: ids[i], Endpoint: fmt.Sprintf("http://127.0.0.1:%d", 9000+i)})
		}
		if apiOK := !hasErrorAt(sluicev1.Validate(tier).ToAggregate(), "spec.members"); apiOK != want {
			t.Errorf("API validation of %d members: accepted %t, want %t", n, apiOK, want)
		}
		if _, err := scheduler.Rank(ids, 0, cands); (err == nil) != want {
			t.Errorf("scheduler.Rank of %d members: %v, want accepted %t", n, err, want)
		}
	}
}

// TestCRDRepeatsTheBounds proves the generated CRD's markers, which cannot
// reference constants, carry the bounds' values.
func TestCRDRepeatsTheBounds(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/sluice.dev_replicatiers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	spec := dig(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"members", "maxItems"}, float64(bounds.MaxMembers)},
		{[]any{"aliases", "maxItems"}, float64(bounds.MaxAliases)},
		{[]any{"maxConcurrency", "minimum"}, float64(bounds.MinConcurrency)},
		{[]any{"maxConcurrency", "maximum"}, float64(bounds.MaxConcurrency)},
		{[]any{"members", "items", "properties", "id", "maxLength"}, float64(bounds.MaxMemberIDLength)},
		{[]any{"members", "items", "properties", "id", "pattern"}, bounds.MemberIDPattern},
		{[]any{"members", "items", "properties", "maxConcurrency", "minimum"}, float64(bounds.MinConcurrency)},
		{[]any{"members", "items", "properties", "maxConcurrency", "maximum"}, float64(bounds.MaxConcurrency)},
		{[]any{"queue", "properties", "maxRequests", "minimum"}, float64(1)},
		{[]any{"queue", "properties", "maxRequests", "maximum"}, float64(bounds.MaxQueueRequests)},
		{[]any{"queue", "properties", "maxRequestsPerTenant", "minimum"}, float64(1)},
		{[]any{"queue", "properties", "maxRequestsPerTenant", "maximum"}, float64(bounds.MaxQueueRequests)},
	} {
		if got := dig(t, spec, c.path...); got != c.want {
			t.Errorf("CRD spec.%v = %v, want %v", c.path, got, c.want)
		}
	}

	// Every named series is a SeriesSelector: its length bound and its CEL
	// rule, whose regular expression is the pattern verbatim.
	for _, signal := range []string{"running", "waiting", "kvUsage"} {
		sel := dig(t, spec, "members", "items", "properties", "metrics", "properties", "series", "properties", signal)
		if got := dig(t, sel, "maxLength"); got != float64(bounds.MaxSeriesSelectorLength) {
			t.Errorf("CRD series.%s maxLength = %v, want %d", signal, got, bounds.MaxSeriesSelectorLength)
		}
		if rule, _ := dig(t, sel, "x-kubernetes-validations", 0, "rule").(string); rule != "self.matches(r'"+bounds.SeriesSelectorPattern+"')" {
			t.Errorf("CRD series.%s rule = %q, want SeriesSelectorPattern", signal, rule)
		}
	}

	// The router's queue report: its bounds are the spec's, and no request
	// waits longer than the longest maxWait.
	queue := dig(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "status", "properties", "queue", "properties")
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"maxRequests", "minimum"}, float64(1)},
		{[]any{"maxRequests", "maximum"}, float64(bounds.MaxQueueRequests)},
		{[]any{"waiting", "minimum"}, float64(0)},
		{[]any{"waiting", "maximum"}, float64(bounds.MaxQueueRequests)},
		{[]any{"oldestWaitSeconds", "minimum"}, float64(0)},
		{[]any{"oldestWaitSeconds", "maximum"}, float64(bounds.MaxQueueWaitMillis / 1000)},
	} {
		if got := dig(t, queue, c.path...); got != c.want {
			t.Errorf("CRD status.queue.%v = %v, want %v", c.path, got, c.want)
		}
	}

	// The queue's wait bounds are in its CEL rule: duration('…') literals.
	rule, _ := dig(t, spec, "queue", "properties", "maxWait", "x-kubernetes-validations", 0, "rule").(string)
	literals := regexp.MustCompile(`duration\('([^']+)'\)`).FindAllStringSubmatch(rule, -1)
	if len(literals) != 2 {
		t.Fatalf("maxWait rule %q: want two duration literals", rule)
	}
	for i, want := range []time.Duration{bounds.MinQueueWaitMillis * time.Millisecond, bounds.MaxQueueWaitMillis * time.Millisecond} {
		if got, err := time.ParseDuration(literals[i][1]); err != nil || got != want {
			t.Errorf("maxWait rule bound %d = %q, want %v", i, literals[i][1], want)
		}
	}
}

// TestCRDListsTheStrategies proves the strategy enum of the generated CRD
// is Strategies, in order, and that Validate accepts exactly those (and no
// strategy) on a replica tier, naming them when it refuses another.
func TestCRDListsTheStrategies(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/sluice.dev_replicatiers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	enum := dig(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "strategy", "enum")
	var want []any
	for _, s := range bounds.Strategies() {
		want = append(want, string(s))
	}
	if fmt.Sprint(enum) != fmt.Sprint(want) {
		t.Errorf("CRD spec.strategy enum = %v, want %v", enum, want)
	}
	base := validationtable.Base()
	for _, s := range append(bounds.Strategies(), "") {
		tier := base.DeepCopy()
		tier.Spec.Strategy = s
		if errs := sluicev1.Validate(tier); len(errs) != 0 {
			t.Errorf("strategy %q: Validate = %v", s, errs)
		}
	}
	tier := base.DeepCopy()
	tier.Spec.Strategy = "Fastest"
	err = sluicev1.Validate(tier).ToAggregate()
	if !hasErrorAt(err, "spec.strategy") || !strings.Contains(err.Error(), `supported values: "RoundRobin", "Capacity"`) {
		t.Errorf("strategy Fastest: Validate = %v", err)
	}
}

// TestStrategyName: a direct tier's empty strategy is named Direct, every
// other strategy by itself.
func TestStrategyName(t *testing.T) {
	if got := bounds.StrategyName(""); got != "Direct" {
		t.Errorf(`StrategyName("") = %q, want Direct`, got)
	}
	for _, s := range bounds.Strategies() {
		if got := bounds.StrategyName(s); got != string(s) {
			t.Errorf("StrategyName(%q) = %q", s, got)
		}
	}
}

// TestSeriesSelectorMatchers proves SeriesSelectorPattern admits
// MaxSeriesMatchers matchers and no more, through the API's validation.
func TestSeriesSelectorMatchers(t *testing.T) {
	for n := 1; n <= bounds.MaxSeriesMatchers+1; n++ {
		matchers := make([]string, n)
		for i := range matchers {
			matchers[i] = fmt.Sprintf(`l%d="v"`, i)
		}
		tier := validationtable.Base()
		tier.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: sluicev1.SeriesSelector("m{" + strings.Join(matchers, ",") + "}")}
		want := n <= bounds.MaxSeriesMatchers
		if ok := !hasErrorAt(sluicev1.Validate(tier).ToAggregate(), "spec.members[0].metrics.series.running"); ok != want {
			t.Errorf("%d matchers: accepted %t, want %t", n, ok, want)
		}
	}
}

// TestStrategyUsesPressure: Capacity alone ranks by engine pressure;
// RoundRobin, a direct tier's empty strategy and a name outside the enum
// do not.
func TestStrategyUsesPressure(t *testing.T) {
	for _, tc := range []struct {
		s    bounds.Strategy
		want bool
	}{
		{bounds.StrategyCapacity, true},
		{bounds.StrategyRoundRobin, false},
		{"", false},
		{"Direct", false},
		{"capacity", false},
	} {
		if got := tc.s.UsesPressure(); got != tc.want {
			t.Errorf("%q.UsesPressure() = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// hasErrorAt reports whether err names field.
func hasErrorAt(err error, field string) bool {
	return err != nil && strings.Contains(err.Error(), field+":")
}

// candidate is an eligible, idle member with a fresh sample.
func candidate(id string) scheduler.Candidate {
	return scheduler.Candidate{MemberID: id, Eligible: true, Capacity: 4,
		Pressure: scheduler.Pressure{Freshness: scheduler.FreshnessFresh, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}}
}

// parsesWithMember reports whether an admitted decision record whose
// member is id parses.
func parsesWithMember(t *testing.T, id string) bool {
	t.Helper()
	line, err := (&evidence.Record{RequestID: "r1", Time: time.Unix(1_700_000_000, 0).UTC(), Duration: time.Millisecond,
		Alias: "llama", Tier: "ns/llama", Outcome: evidence.OutcomeAdmitted, Status: 200, Member: "placeholder",
		Dispatch: time.Microsecond, End: evidence.StreamComplete}).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	member := []byte(fmt.Sprintf("%q", id))
	line = bytes.Replace(line, []byte(`"placeholder"`), member, 1)
	_, err = evidence.ParseRecord(bytes.TrimSuffix(line, []byte("\n")))
	return err == nil
}

// dig walks v by map keys and slice indexes.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %q in %T", k, v)
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("no [%d] in %T", k, v)
			}
			v = s[k]
		}
	}
	return v
}
