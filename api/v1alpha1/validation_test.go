package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// TestValidateTable runs the shared table against the Go function; the
// envtest suite runs the same rows against the API server.
func TestValidateTable(t *testing.T) {
	rows := validationtable.Rows()
	if len(rows) < 30 {
		t.Fatalf("table has %d rows, want at least 30", len(rows))
	}
	for _, row := range rows {
		t.Run(row.Desc, func(t *testing.T) {
			obj := validationtable.Base()
			row.Mutate(obj)
			err := sluicev1.Validate(obj).ToAggregate()
			if len(row.WantErrors) == 0 {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted, want %q", row.WantErrors)
			}
			for _, want := range row.WantErrors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestValidateDoesNotMutate(t *testing.T) {
	obj := validationtable.Base()
	obj.Spec.Members[0].Metrics.Path = ""
	before := obj.DeepCopy()
	_ = sluicev1.Validate(obj)
	if obj.Spec.Members[0].Metrics.Path != before.Spec.Members[0].Metrics.Path || obj.Spec.Upstream != nil {
		t.Fatal("Validate changed its input")
	}
}

func TestDefault(t *testing.T) {
	obj := validationtable.Base()
	sluicev1.Default(obj)
	if got := obj.Spec.Members[0].Metrics.Path; got != sluicev1.DefaultMetricsPath {
		t.Errorf("metrics path = %q, want %q", got, sluicev1.DefaultMetricsPath)
	}
	if obj.Spec.Members[1].Metrics != nil {
		t.Error("Default invented a metrics block")
	}
	if got := obj.Spec.Upstream.ResponseHeaderTimeout.Duration; got != 120*time.Second {
		t.Errorf("header timeout = %v", got)
	}
	if got := obj.Spec.Upstream.IdleTimeout.Duration; got != 60*time.Second {
		t.Errorf("idle timeout = %v", got)
	}

	custom := validationtable.Base()
	custom.Spec.Members[0].Metrics.Path = "/custom"
	custom.Spec.Upstream = &sluicev1.UpstreamSpec{IdleTimeout: &metav1.Duration{Duration: 5 * time.Second}}
	sluicev1.Default(custom)
	if custom.Spec.Members[0].Metrics.Path != "/custom" || custom.Spec.Upstream.IdleTimeout.Duration != 5*time.Second {
		t.Error("Default overwrote a set field")
	}
	if custom.Spec.Upstream.ResponseHeaderTimeout.Duration != 120*time.Second {
		t.Error("Default left an unset timeout empty")
	}
}

func TestEffectiveStrategy(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		members  int
		strategy sluicev1.Strategy
		want     sluicev1.Strategy
		wantName string // what the admin API and the plugin's status show.
	}{
		{"direct", 1, "", "", "Direct"},
		{"replica without strategy", 2, "", sluicev1.StrategyRoundRobin, "RoundRobin"},
		{"round robin", 3, sluicev1.StrategyRoundRobin, sluicev1.StrategyRoundRobin, "RoundRobin"},
		{"capacity", 2, sluicev1.StrategyCapacity, sluicev1.StrategyCapacity, "Capacity"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := sluicev1.ReplicaTierSpec{Strategy: tc.strategy, Members: make([]sluicev1.Member, tc.members)}
			if got := s.EffectiveStrategy(); got != tc.want {
				t.Errorf("EffectiveStrategy() = %q, want %q", got, tc.want)
			}
			if got := s.Direct(); got != (tc.members == 1) {
				t.Errorf("Direct() = %v with %d members", got, tc.members)
			}
			if got := s.StrategyName(); got != tc.wantName {
				t.Errorf("StrategyName() = %q, want %q", got, tc.wantName)
			}
		})
	}
}

func TestEffectiveUpstreamModel(t *testing.T) {
	for _, tc := range []struct {
		in, want sluicev1.UpstreamModel
	}{
		{"", sluicev1.UpstreamModelServedModel},
		{sluicev1.UpstreamModelServedModel, sluicev1.UpstreamModelServedModel},
		{sluicev1.UpstreamModelAlias, sluicev1.UpstreamModelAlias},
	} {
		s := sluicev1.ReplicaTierSpec{UpstreamModel: tc.in}
		if got := s.EffectiveUpstreamModel(); got != tc.want {
			t.Errorf("EffectiveUpstreamModel() with %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func tier(ns, name, node string, created int64, aliases ...string) sluicev1.ReplicaTier {
	t := validationtable.Base()
	t.Namespace, t.Name = ns, name
	t.Spec.NodeName = node
	t.Spec.Aliases = aliases
	t.CreationTimestamp = metav1.Unix(created, 0)
	return *t
}

func TestLostAliases(t *testing.T) {
	invalid := tier("a", "invalid", "n1", 1, "x")
	invalid.Spec.Members = nil
	deleting := tier("a", "deleting", "n1", 1, "x")
	now := metav1.Unix(5, 0)
	deleting.DeletionTimestamp = &now

	for _, tc := range []struct {
		desc   string
		self   sluicev1.ReplicaTier
		peers  []sluicev1.ReplicaTier
		before func(a, b *sluicev1.ReplicaTier) bool
		want   []sluicev1.AliasLoss
	}{
		{
			desc:   "older tier keeps the alias",
			self:   tier("b", "new", "n1", 20, "x", "y"),
			peers:  []sluicev1.ReplicaTier{tier("z", "old", "n1", 10, "y")},
			before: sluicev1.ByCreation,
			want:   []sluicev1.AliasLoss{{Alias: "y", Holder: "z/old"}},
		},
		{
			desc:   "the oldest of several claimants is named",
			self:   tier("b", "new", "n1", 30, "x"),
			peers:  []sluicev1.ReplicaTier{tier("a", "mid", "n1", 20, "x"), tier("a", "oldest", "n1", 10, "x")},
			before: sluicev1.ByCreation,
			want:   []sluicev1.AliasLoss{{Alias: "x", Holder: "a/oldest"}},
		},
		{
			desc:   "the older tier loses nothing",
			self:   tier("z", "old", "n1", 10, "y"),
			peers:  []sluicev1.ReplicaTier{tier("b", "new", "n1", 20, "y")},
			before: sluicev1.ByCreation,
		},
		{
			desc:   "equal creation times fall back to namespace/name",
			self:   tier("b", "t", "n1", 10, "x"),
			peers:  []sluicev1.ReplicaTier{tier("a", "t", "n1", 10, "x")},
			before: sluicev1.ByCreation,
			want:   []sluicev1.AliasLoss{{Alias: "x", Holder: "a/t"}},
		},
		{
			desc:   "files mode orders by namespace/name only",
			self:   tier("a", "b", "n1", 10, "x"),
			peers:  []sluicev1.ReplicaTier{tier("a", "c", "n1", 1, "x")},
			before: sluicev1.ByName,
		},
		{
			desc:   "other nodes, itself, invalid and deleting tiers hold nothing",
			self:   tier("b", "new", "n1", 20, "x"),
			peers:  []sluicev1.ReplicaTier{tier("a", "other", "n2", 1, "x"), tier("b", "new", "n1", 20, "x"), invalid, deleting},
			before: sluicev1.ByCreation,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := sluicev1.LostAliases(&tc.self, tc.peers, tc.before)
			if len(got) != len(tc.want) {
				t.Fatalf("LostAliases = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("loss %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestEffectiveMemberLocality(t *testing.T) {
	for _, tc := range []struct {
		in, want sluicev1.MemberLocality
	}{
		{"", sluicev1.MemberLocalitySameHost},
		{sluicev1.MemberLocalitySameHost, sluicev1.MemberLocalitySameHost},
		{sluicev1.MemberLocalityAny, sluicev1.MemberLocalityAny},
	} {
		s := sluicev1.ReplicaTierSpec{MemberLocality: tc.in}
		if got := s.EffectiveMemberLocality(); got != tc.want {
			t.Errorf("EffectiveMemberLocality() with %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestValidateNamesDuplicateMemberID: a duplicate member id is reported
// at the id field with its value, so a files-mode user sees which field of
// which member to fix.
func TestValidateNamesDuplicateMemberID(t *testing.T) {
	obj := validationtable.Base()
	obj.Spec.Members[1].ID = obj.Spec.Members[0].ID
	err := sluicev1.Validate(obj).ToAggregate()
	if want := `spec.members[1].id: Duplicate value: "` + obj.Spec.Members[0].ID + `"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate = %v, want %q", err, want)
	}
}
