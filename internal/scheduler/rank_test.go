package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

func fresh(ppm int64) scheduler.Pressure {
	return scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: ppm, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
}

func notFresh(class scheduler.Freshness) scheduler.Pressure {
	p := scheduler.UnknownPressure()
	p.Freshness = class
	if class == scheduler.FreshnessStale {
		p.RequestState = scheduler.SignalValid
	}
	return p
}

var (
	unknown = scheduler.UnknownPressure()
	stale   = notFresh(scheduler.FreshnessStale)
	failed  = notFresh(scheduler.FreshnessFailed)
)

// c builds an eligible candidate.
func c(id string, active, capacity int, p scheduler.Pressure) scheduler.Candidate {
	return scheduler.Candidate{MemberID: id, Eligible: true, Active: active, Capacity: capacity, Pressure: p}
}

// ineligible returns cand with Eligible false.
func ineligible(cand scheduler.Candidate) scheduler.Candidate {
	cand.Eligible = false
	return cand
}

var ab = []string{"a", "b"}

func TestRankOrder(t *testing.T) {
	abcd := []string{"a", "b", "c", "d"}
	tests := []struct {
		desc       string
		membership []string
		cursor     int
		candidates []scheduler.Candidate
		wantOrder  []string // Score rows, winning first.
	}{
		// Local ratio.
		{"lower local ratio wins", ab, 0,
			[]scheduler.Candidate{c("a", 1, 2, fresh(0)), c("b", 0, 2, fresh(0))}, []string{"b", "a"}},
		{"ratio not count: 2/8 beats 1/2", ab, 1,
			[]scheduler.Candidate{c("a", 2, 8, fresh(0)), c("b", 1, 2, fresh(0))}, []string{"a", "b"}},
		{"1/3 and 2/6 tie exactly, cursor 0", ab, 0,
			[]scheduler.Candidate{c("a", 1, 3, unknown), c("b", 2, 6, unknown)}, []string{"a", "b"}},
		{"1/3 and 2/6 tie exactly, cursor 1", ab, 1,
			[]scheduler.Candidate{c("a", 1, 3, unknown), c("b", 2, 6, unknown)}, []string{"b", "a"}},
		{"33333/100000 is below 1/3", ab, 0,
			[]scheduler.Candidate{c("a", 1, 3, fresh(0)), c("b", 33333, 100000, fresh(0))}, []string{"b", "a"}},
		{"1/100000 is below 1/99999 though both round to 10 ppm", ab, 0,
			[]scheduler.Candidate{c("a", 1, 99999, fresh(0)), c("b", 1, 100000, fresh(0))}, []string{"b", "a"}},
		{"2/99999 is below 1/49999 though both round to 20 ppm", ab, 0,
			[]scheduler.Candidate{c("a", 1, 49999, fresh(0)), c("b", 2, 99999, fresh(0))}, []string{"b", "a"}},
		{"local ratio beats upstream pressure", ab, 0,
			[]scheduler.Candidate{c("a", 1, 2, fresh(0)), c("b", 0, 2, fresh(2_000_000_000_000_000))}, []string{"b", "a"}},

		// Upstream unknown.
		{"unknown 0/2 beats fresh 1/2", ab, 1,
			[]scheduler.Candidate{c("a", 0, 2, unknown), c("b", 1, 2, fresh(0))}, []string{"a", "b"}},
		{"fresh 0 ppm beats unknown at equal load", ab, 0,
			[]scheduler.Candidate{c("a", 0, 2, unknown), c("b", 0, 2, fresh(0))}, []string{"b", "a"}},
		{"fresh high ppm beats unknown at equal load", ab, 1,
			[]scheduler.Candidate{c("a", 1, 4, fresh(2_000_000_000_000_000)), c("b", 1, 4, unknown)}, []string{"a", "b"}},
		{"fresh beats stale at equal load", ab, 0,
			[]scheduler.Candidate{c("a", 0, 2, stale), c("b", 0, 2, fresh(999_999))}, []string{"b", "a"}},
		{"fresh beats failed at equal load", ab, 0,
			[]scheduler.Candidate{c("a", 0, 2, failed), c("b", 0, 2, fresh(999_999))}, []string{"b", "a"}},
		{"stale, failed and unknown rank alike", abcd, 2,
			[]scheduler.Candidate{c("a", 0, 2, stale), c("b", 0, 2, failed), c("c", 0, 2, unknown), c("d", 0, 2, stale)},
			[]string{"c", "d", "a", "b"}},

		// Upstream PPM.
		{"lower ppm wins", ab, 0,
			[]scheduler.Candidate{c("a", 0, 2, fresh(10)), c("b", 0, 2, fresh(5))}, []string{"b", "a"}},
		{"ppm above 1e6 compares", ab, 0,
			[]scheduler.Candidate{c("a", 0, 2, fresh(2_000_000)), c("b", 0, 2, fresh(1_500_000))}, []string{"b", "a"}},

		// Rotation.
		{"equal rows follow the cursor", abcd, 0,
			[]scheduler.Candidate{c("a", 0, 2, fresh(7)), c("b", 0, 2, fresh(7)), c("c", 0, 2, fresh(7)), c("d", 0, 2, fresh(7))},
			[]string{"a", "b", "c", "d"}},
		{"rotation wraps from the cursor", abcd, 3,
			[]scheduler.Candidate{c("a", 0, 2, fresh(7)), c("b", 0, 2, fresh(7)), c("c", 0, 2, fresh(7)), c("d", 0, 2, fresh(7))},
			[]string{"d", "a", "b", "c"}},
		{"all unknown: local ratio, then rotation", abcd, 2,
			[]scheduler.Candidate{c("a", 1, 2, unknown), c("b", 0, 2, unknown), c("c", 1, 2, unknown), c("d", 0, 3, unknown)},
			[]string{"d", "b", "c", "a"}},
		{"rotation uses the full membership when a candidate is absent", abcd, 1,
			[]scheduler.Candidate{c("a", 0, 2, unknown), c("c", 0, 2, unknown), c("d", 0, 2, unknown)},
			[]string{"c", "d", "a"}},

		// Filtering.
		{"ineligible is dropped", ab, 0,
			[]scheduler.Candidate{ineligible(c("a", 0, 2, fresh(0))), c("b", 1, 2, unknown)}, []string{"b"}},
		{"full is dropped", ab, 0,
			[]scheduler.Candidate{c("a", 2, 2, fresh(0)), c("b", 1, 2, unknown)}, []string{"b"}},
		{"over a lowered ceiling is dropped", ab, 0,
			[]scheduler.Candidate{c("a", 5, 2, fresh(0)), c("b", 1, 2, unknown)}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d, err := scheduler.Rank(tt.membership, tt.cursor, tt.candidates)
			if err != nil {
				t.Fatalf("Rank() error = %v", err)
			}
			if got := rowIDs(d); !slices.Equal(got, tt.wantOrder) {
				t.Fatalf("score order = %v, want %v", got, tt.wantOrder)
			}
			if d.SelectedMemberID != tt.wantOrder[0] || d.Reason != scheduler.ReasonSelected {
				t.Errorf("selected %q (%s), want %q (selected)", d.SelectedMemberID, d.Reason, tt.wantOrder[0])
			}
			if want := slices.Sorted(slices.Values(tt.wantOrder)); !slices.Equal(d.EligibleIDs, want) {
				t.Errorf("EligibleIDs = %v, want %v", d.EligibleIDs, want)
			}
			if err := d.Validate(); err != nil {
				t.Errorf("Decision.Validate() = %v", err)
			}
		})
	}
}

func rowIDs(d scheduler.Decision) []string {
	ids := make([]string, len(d.Scores))
	for i, s := range d.Scores {
		ids[i] = s.MemberID
	}
	return ids
}

func TestRankScoreRows(t *testing.T) {
	d, err := scheduler.Rank([]string{"a", "b", "c"}, 1, []scheduler.Candidate{
		c("c", 0, 4, stale), c("a", 3, 4, fresh(123)), c("b", 0, 4, fresh(456)), // b wins, c, a.
	})
	if err != nil {
		t.Fatal(err)
	}
	want := scheduler.Decision{
		SelectedMemberID: "b",
		Reason:           scheduler.ReasonSelected,
		EligibleIDs:      []string{"a", "b", "c"},
		Scores: []scheduler.Score{
			{MemberID: "b", LocalActive: 0, LocalCapacity: 4, UpstreamFreshness: scheduler.FreshnessFresh, UpstreamPPM: 456, RotatingRank: 0},
			{MemberID: "c", LocalActive: 0, LocalCapacity: 4, UpstreamFreshness: scheduler.FreshnessStale, UpstreamUnknown: true, RotatingRank: 1},
			{MemberID: "a", LocalActive: 3, LocalCapacity: 4, UpstreamFreshness: scheduler.FreshnessFresh, UpstreamPPM: 123, RotatingRank: 2},
		},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Rank() = %+v\nwant %+v", d, want)
	}
}

func TestRankNoEligibleMember(t *testing.T) {
	d, err := scheduler.Rank(ab, 1, []scheduler.Candidate{ineligible(c("a", 0, 2, fresh(0))), c("b", 2, 2, fresh(0))})
	if err != nil {
		t.Fatalf("Rank() error = %v, want an ordinary decision", err)
	}
	if d.SelectedMemberID != "" || d.Reason != scheduler.ReasonNoEligibleMember {
		t.Errorf("Rank() = %+v, want no selection with reason no-eligible-member", d)
	}
	if d.EligibleIDs == nil || len(d.EligibleIDs) != 0 || d.Scores == nil || len(d.Scores) != 0 {
		t.Errorf("EligibleIDs = %#v, Scores = %#v, want empty non-nil slices", d.EligibleIDs, d.Scores)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Decision.Validate() = %v", err)
	}
	b, _ := json.Marshal(d)
	if want := `{"selected_member_id":"","reason":"no-eligible-member","eligible_ids":[],"scores":[]}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

// TestRankDecisiveSequence replays the acceptance sequence: loads 0/2 and 1/2
// both fresh select the first; after that reservation the loads are equal and
// the advanced cursor gives the next selection to the other member.
func TestRankDecisiveSequence(t *testing.T) {
	d, err := scheduler.Rank(ab, 0, []scheduler.Candidate{c("a", 0, 2, fresh(0)), c("b", 1, 2, fresh(0))})
	if err != nil || d.SelectedMemberID != "a" {
		t.Fatalf("first Rank() = %q, %v; want a", d.SelectedMemberID, err)
	}
	cursor := 1 // (index of a + 1) mod 2.
	d, err = scheduler.Rank(ab, cursor, []scheduler.Candidate{c("a", 1, 2, fresh(0)), c("b", 1, 2, fresh(0))})
	if err != nil || d.SelectedMemberID != "b" {
		t.Fatalf("second Rank() = %q, %v; want b", d.SelectedMemberID, err)
	}
}

// TestRankRotationIsFair selects k·N times among equal idle members, advancing
// the cursor past each winner as the admission owner does, and expects every
// member exactly k times.
func TestRankRotationIsFair(t *testing.T) {
	for _, n := range []int{2, 3, 7, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			membership := memberIDs(n)
			cands := make([]scheduler.Candidate, n)
			for i, id := range membership {
				cands[i] = c(id, 0, 1+i, fresh(42))
			}
			const k = 5
			count := map[string]int{}
			cursor := 0
			for range k * n {
				d, err := scheduler.Rank(membership, cursor, cands)
				if err != nil {
					t.Fatal(err)
				}
				count[d.SelectedMemberID]++
				cursor = (slices.Index(membership, d.SelectedMemberID) + 1) % n
			}
			for _, id := range membership {
				if count[id] != k {
					t.Errorf("member %s selected %d times, want %d", id, count[id], k)
				}
			}
		})
	}
}

func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%02d", i)
	}
	return ids
}

func TestRankPermutationInvariance(t *testing.T) {
	membership := []string{"a", "b", "c", "d"}
	inputs := [][]scheduler.Candidate{
		{c("a", 1, 2, fresh(5)), c("b", 0, 2, unknown), c("c", 0, 2, fresh(5)), c("d", 1, 3, stale)},
		{c("a", 0, 2, unknown), c("b", 0, 2, unknown), c("c", 0, 2, unknown), c("d", 0, 2, unknown)},
		{c("a", 0, 2, fresh(0)), ineligible(c("b", 0, 2, fresh(0))), c("c", 2, 2, fresh(0)), c("d", 1, 3, fresh(0))},
	}
	for i, in := range inputs {
		for cursor := range membership {
			want, err := scheduler.Rank(membership, cursor, in)
			if err != nil {
				t.Fatal(err)
			}
			permutations(in, func(p []scheduler.Candidate) {
				got, err := scheduler.Rank(membership, cursor, p)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("input %d cursor %d: permutation %v gives %+v, want %+v", i, cursor, candidateIDs(p), got, want)
				}
			})
		}
	}
}

// permutations calls fn with every ordering of cands (Heap's algorithm).
func permutations(cands []scheduler.Candidate, fn func([]scheduler.Candidate)) {
	p := slices.Clone(cands)
	var generate func(k int)
	generate = func(k int) {
		if k == 1 {
			fn(slices.Clone(p))
			return
		}
		generate(k - 1)
		for i := 0; i < k-1; i++ {
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
			generate(k - 1)
		}
	}
	generate(len(p))
}

func candidateIDs(cands []scheduler.Candidate) []string {
	ids := make([]string, len(cands))
	for i, cand := range cands {
		ids[i] = cand.MemberID
	}
	return ids
}

func TestPermutationsCoversAll(t *testing.T) {
	seen := map[string]bool{}
	permutations([]scheduler.Candidate{{MemberID: "a"}, {MemberID: "b"}, {MemberID: "c"}, {MemberID: "d"}}, func(p []scheduler.Candidate) {
		seen[strings.Join(candidateIDs(p), "")] = true
	})
	if len(seen) != 24 {
		t.Fatalf("permutations produced %d distinct orders, want 24", len(seen))
	}
}

func TestRankInvalidInput(t *testing.T) {
	sixteen := memberIDs(16)
	seventeenCands := make([]scheduler.Candidate, 17)
	for i := range seventeenCands {
		seventeenCands[i] = c(sixteen[i%16], 0, 1, unknown)
	}
	ok := []scheduler.Candidate{c("a", 0, 2, unknown), c("b", 0, 2, unknown)}
	with := func(mutate func(*scheduler.Candidate)) []scheduler.Candidate {
		cands := slices.Clone(ok)
		mutate(&cands[1])
		return cands
	}
	tests := []struct {
		desc       string
		membership []string
		cursor     int
		candidates []scheduler.Candidate
		want       error
	}{
		{"one member", []string{"a"}, 0, ok, scheduler.ErrInvalidMembership},
		{"seventeen members", append(memberIDs(16), "m99"), 0, ok, scheduler.ErrInvalidMembership},
		{"unsorted membership", []string{"b", "a"}, 0, ok, scheduler.ErrInvalidMembership},
		{"duplicate membership", []string{"a", "a"}, 0, ok, scheduler.ErrInvalidMembership},
		{"empty id", []string{"", "a"}, 0, ok, scheduler.ErrInvalidMembership},
		{"unsafe id", []string{"a", "b/c"}, 0, ok, scheduler.ErrInvalidMembership},
		{"negative cursor", ab, -1, ok, scheduler.ErrInvalidCursor},
		{"cursor at N", ab, 2, ok, scheduler.ErrInvalidCursor},
		{"one candidate", ab, 0, ok[:1], scheduler.ErrInvalidCandidates},
		{"no candidates", ab, 0, nil, scheduler.ErrInvalidCandidates},
		{"seventeen candidates", sixteen, 0, seventeenCands, scheduler.ErrInvalidCandidates},
		{"duplicate candidate", ab, 0, []scheduler.Candidate{ok[0], ok[0]}, scheduler.ErrInvalidCandidates},
		{"candidate outside membership", ab, 0, with(func(x *scheduler.Candidate) { x.MemberID = "z" }), scheduler.ErrInvalidCandidates},
		{"negative active", ab, 0, with(func(x *scheduler.Candidate) { x.Active = -1 }), scheduler.ErrInvalidCandidate},
		{"active above 1e9", ab, 0, with(func(x *scheduler.Candidate) { x.Active = 1_000_000_001 }), scheduler.ErrInvalidCandidate},
		{"zero capacity", ab, 0, with(func(x *scheduler.Candidate) { x.Capacity = 0 }), scheduler.ErrInvalidCandidate},
		{"capacity above bound", ab, 0, with(func(x *scheduler.Candidate) { x.Capacity = 100_001 }), scheduler.ErrInvalidCandidate},
		{"fresh with negative ppm", ab, 0, with(func(x *scheduler.Candidate) { x.Pressure = fresh(-1) }), scheduler.ErrInvalidPressure},
		{"freshness outside the set", ab, 0, with(func(x *scheduler.Candidate) { x.Pressure.Freshness = scheduler.Freshness(5) }), scheduler.ErrInvalidPressure},
		{"ineligible invalid candidate still refuses", ab, 0, with(func(x *scheduler.Candidate) { x.Eligible = false; x.Capacity = 0 }), scheduler.ErrInvalidCandidate},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d, err := scheduler.Rank(tt.membership, tt.cursor, tt.candidates)
			if err != tt.want { // the errors are fixed values, never wrapped.
				t.Fatalf("Rank() error = %v, want exactly %v", err, tt.want)
			}
			if !reflect.DeepEqual(d, scheduler.Decision{}) {
				t.Errorf("Rank() decision = %+v, want zero on error", d)
			}
		})
	}
	// Boundary values are accepted.
	if _, err := scheduler.Rank(ab, 1, []scheduler.Candidate{c("a", 1_000_000_000, 100_000, unknown), c("b", 0, 1, fresh(2_000_000_000_000_000))}); err != nil {
		t.Errorf("Rank() at the bounds = %v, want nil", err)
	}
	if _, err := scheduler.Rank(sixteen, 15, seventeenCands[:16]); err != nil {
		t.Errorf("Rank() with 16 members = %v, want nil", err)
	}
}

func TestRankDoesNotShare(t *testing.T) {
	membership := []string{"a", "b"}
	cands := []scheduler.Candidate{c("a", 0, 2, fresh(3)), c("b", 0, 2, fresh(3))}
	d, err := scheduler.Rank(membership, 0, cands)
	if err != nil {
		t.Fatal(err)
	}
	want := d.Clone()
	membership[0], cands[0].MemberID, cands[0].Active = "x", "x", 1
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("decision changed with its inputs: %+v", d)
	}
	clone := d.Clone()
	clone.EligibleIDs[0], clone.Scores[0].MemberID = "changed", "changed"
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("decision changed through its clone: %+v", d)
	}

	// The rows and ids of a decision share one allocation; each is full to
	// its capacity, so appending to one never writes into the other, for
	// every row count (the allocation rounds 3, 5..7 and 9..15 rows up).
	for m := 2; m <= bounds.MaxMembers; m++ {
		ids := memberIDs(m)
		cands := make([]scheduler.Candidate, m)
		for i, id := range ids {
			cands[i] = c(id, 0, 2, fresh(int64(i)))
		}
		d, err := scheduler.Rank(ids, 0, cands)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []scheduler.Decision{d, d.Clone()} {
			want := d.Clone()
			if cap(d.Scores) != m || cap(d.EligibleIDs) != m {
				t.Fatalf("%d rows: capacities %d and %d, want %d", m, cap(d.Scores), cap(d.EligibleIDs), m)
			}
			_ = append(d.Scores, scheduler.Score{MemberID: "appended"})
			_ = append(d.EligibleIDs, "appended")
			if !reflect.DeepEqual(d, want) {
				t.Fatalf("%d rows: appending changed the decision: %+v", m, d)
			}
		}
	}
	// A decision built by hand with inconsistent lengths still clones.
	odd := scheduler.Decision{EligibleIDs: []string{"a"}, Scores: []scheduler.Score{{MemberID: "a"}, {MemberID: "b"}}}
	if got := odd.Clone(); !reflect.DeepEqual(got, odd) || &got.Scores[0] == &odd.Scores[0] {
		t.Fatalf("Clone() = %+v, want an unshared copy of %+v", got, odd)
	}
}

func TestDecisionJSON(t *testing.T) {
	d, err := scheduler.Rank(ab, 0, []scheduler.Candidate{c("a", 1, 2, unknown), c("b", 0, 3, fresh(0))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"selected_member_id":"b","reason":"selected","eligible_ids":["a","b"],"scores":[` +
		`{"member_id":"b","local_active":0,"local_capacity":3,"upstream_freshness":"fresh","upstream_ppm":0,"upstream_unknown":false,"rotating_rank":1},` +
		`{"member_id":"a","local_active":1,"local_capacity":2,"upstream_freshness":"unknown","upstream_ppm":null,"upstream_unknown":true,"rotating_rank":0}]}`
	if string(got) != want {
		t.Fatalf("JSON =\n%s\nwant\n%s", got, want)
	}
	var back scheduler.Decision
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip = %+v, want %+v", back, d)
	}
	// A non-fresh score never serializes a PPM, even one set by mistake.
	s, _ := json.Marshal(scheduler.Score{MemberID: "a", UpstreamFreshness: scheduler.FreshnessStale, UpstreamPPM: 9, UpstreamUnknown: true})
	if !strings.Contains(string(s), `"upstream_ppm":null`) {
		t.Errorf("stale score JSON = %s, want upstream_ppm null", s)
	}
}

func TestDecisionValidate(t *testing.T) {
	base := func() scheduler.Decision {
		d, err := scheduler.Rank([]string{"a", "b", "c"}, 0, []scheduler.Candidate{c("a", 1, 2, fresh(5)), c("b", 0, 2, unknown), c("c", 0, 2, fresh(5))})
		if err != nil {
			t.Fatal(err)
		}
		return d // c, b, a.
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("Validate() of a Rank result = %v", err)
	}
	tests := []struct {
		desc   string
		mutate func(*scheduler.Decision)
	}{
		{"unknown reason", func(d *scheduler.Decision) { d.Reason = "chosen" }},
		{"selected is not the first row", func(d *scheduler.Decision) { d.SelectedMemberID = "b" }},
		{"selected without rows", func(d *scheduler.Decision) { d.Scores, d.EligibleIDs = nil, nil }},
		{"no-eligible with a selection", func(d *scheduler.Decision) {
			d.Reason, d.Scores, d.EligibleIDs = scheduler.ReasonNoEligibleMember, nil, nil
		}},
		{"no-eligible with rows", func(d *scheduler.Decision) { d.Reason, d.SelectedMemberID = scheduler.ReasonNoEligibleMember, "" }},
		{"rows and ids differ in count", func(d *scheduler.Decision) { d.EligibleIDs = d.EligibleIDs[:2] }},
		{"ids unsorted", func(d *scheduler.Decision) { d.EligibleIDs[0], d.EligibleIDs[1] = d.EligibleIDs[1], d.EligibleIDs[0] }},
		{"row not eligible", func(d *scheduler.Decision) { d.EligibleIDs[0] = "0" }},
		{"rows out of order", func(d *scheduler.Decision) { d.Scores[1], d.Scores[2] = d.Scores[2], d.Scores[1] }},
		{"duplicate rotating rank", func(d *scheduler.Decision) { d.Scores[2].RotatingRank = d.Scores[1].RotatingRank }},
		{"rotating rank out of range", func(d *scheduler.Decision) { d.Scores[2].RotatingRank = 16 }},
		{"active at capacity", func(d *scheduler.Decision) { d.Scores[2].LocalActive = 2 }},
		{"capacity out of range", func(d *scheduler.Decision) { d.Scores[2].LocalCapacity = 100_001 }},
		{"unknown flag disagrees with freshness", func(d *scheduler.Decision) { d.Scores[1].UpstreamUnknown = false }},
		{"ppm on non-fresh", func(d *scheduler.Decision) { d.Scores[1].UpstreamPPM = 1 }},
		{"freshness outside the set", func(d *scheduler.Decision) { d.Scores[1].UpstreamFreshness = scheduler.Freshness(0) }},
		{"unsafe member id", func(d *scheduler.Decision) { d.Scores[0].MemberID = "C" }},
		{"one member in two rows", func(d *scheduler.Decision) { d.Scores[2].MemberID = d.Scores[1].MemberID }},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d := base()
			tt.mutate(&d)
			if err := d.Validate(); !errors.Is(err, scheduler.ErrInvalidDecision) {
				t.Fatalf("Validate() = %v, want ErrInvalidDecision", err)
			}
		})
	}
}

func BenchmarkRank(b *testing.B) {
	for _, n := range []int{2, 4, 16} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			membership := memberIDs(n)
			cands := make([]scheduler.Candidate, n)
			for i, id := range membership {
				p := fresh(int64(1000 * (i % 3)))
				if i%4 == 3 {
					p = unknown
				}
				cands[i] = c(id, i%3, 4, p)
			}
			b.ReportAllocs()
			cursor := 0
			for b.Loop() {
				d, err := scheduler.Rank(membership, cursor, cands)
				if err != nil {
					b.Fatal(err)
				}
				cursor = (cursor + 1) % n
				_ = d
			}
		})
	}
}
