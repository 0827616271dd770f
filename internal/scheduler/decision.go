package scheduler

import (
	"encoding/json"
	"slices"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Reason says why a Decision selected what it did.
type Reason string

// The closed set of Reason values.
const (
	// ReasonSelected means a member was selected.
	ReasonSelected Reason = "selected"
	// ReasonNoEligibleMember means no candidate was eligible and below its
	// capacity, so nothing was selected.
	ReasonNoEligibleMember Reason = "no-eligible-member"
)

// Score is the evidence for one eligible candidate: the inputs of its rank
// tuple, copied at the moment of the decision. It has exactly these seven
// fields, ordered so that the two one-byte fields share a word (56 bytes a
// row); its JSON form keeps the field order of the evidence contract.
type Score struct {
	// MemberID is the candidate's member id.
	MemberID string `json:"member_id"`
	// LocalActive is the member's reservation count before the decision.
	LocalActive int `json:"local_active"`
	// LocalCapacity is the member's configured ceiling.
	LocalCapacity int `json:"local_capacity"`
	// UpstreamFreshness is the class of the member's pressure sample.
	UpstreamFreshness Freshness `json:"upstream_freshness"`
	// UpstreamUnknown is true when the pressure is not fresh; every class other
	// than fresh ranks the same way.
	UpstreamUnknown bool `json:"upstream_unknown"`
	// UpstreamPPM is the member's pressure in parts per million. It is
	// meaningful only when UpstreamFreshness is FreshnessFresh, is zero
	// otherwise, and is serialized as null unless fresh.
	UpstreamPPM int64 `json:"upstream_ppm"`
	// RotatingRank is (index in the membership − cursor) mod N: the final tie
	// break, distinct for every member.
	RotatingRank int `json:"rotating_rank"`
}

// scoreJSON is the wire shape of a Score, with the PPM made nullable.
type scoreJSON struct {
	MemberID          string    `json:"member_id"`
	LocalActive       int       `json:"local_active"`
	LocalCapacity     int       `json:"local_capacity"`
	UpstreamFreshness Freshness `json:"upstream_freshness"`
	UpstreamPPM       *int64    `json:"upstream_ppm"`
	UpstreamUnknown   bool      `json:"upstream_unknown"`
	RotatingRank      int       `json:"rotating_rank"`
}

// MarshalJSON encodes the score with its snake_case field names, writing
// upstream_ppm as null unless the pressure was fresh.
func (s Score) MarshalJSON() ([]byte, error) {
	w := scoreJSON{
		MemberID:          s.MemberID,
		LocalActive:       s.LocalActive,
		LocalCapacity:     s.LocalCapacity,
		UpstreamFreshness: s.UpstreamFreshness,
		UpstreamUnknown:   s.UpstreamUnknown,
		RotatingRank:      s.RotatingRank,
	}
	if s.UpstreamFreshness == FreshnessFresh {
		ppm := s.UpstreamPPM
		w.UpstreamPPM = &ppm
	}
	return json.Marshal(w)
}

// Decision is the outcome of one Rank call. It has exactly these four fields.
// Rank returns slices no one else holds; Clone gives a copy that shares
// nothing with the original.
type Decision struct {
	// SelectedMemberID is the winning member, empty when none was eligible.
	SelectedMemberID string `json:"selected_member_id"`
	// Reason is ReasonSelected or ReasonNoEligibleMember.
	Reason Reason `json:"reason"`
	// EligibleIDs are the members that were eligible and below capacity,
	// sorted by id. It is empty, not nil, when none was.
	EligibleIDs []string `json:"eligible_ids"`
	// Scores has one row per eligible member in winning order, at most
	// MaxMembers rows. It is empty, not nil, when none was eligible.
	Scores []Score `json:"scores"`
}

// Clone returns a copy of d that shares no slice with it.
func (d Decision) Clone() Decision {
	if m := len(d.Scores); m == len(d.EligibleIDs) && m >= 1 && m <= bounds.MaxMembers {
		scores, ids := newRows(m)
		copy(scores, d.Scores)
		copy(ids, d.EligibleIDs)
		d.Scores, d.EligibleIDs = scores, ids
		return d
	}
	d.EligibleIDs = append(make([]string, 0, len(d.EligibleIDs)), d.EligibleIDs...)
	d.Scores = append(make([]Score, 0, len(d.Scores)), d.Scores...)
	return d
}

// Validate checks the invariants every Rank result satisfies, for consumers
// that decode captured evidence. It returns ErrInvalidDecision unless: the reason
// is in its closed set; a selection names the first score row and a
// no-eligible-member decision selects nothing and has no rows; there are at
// most MaxMembers rows, one per eligible id, with the ids sorted and unique;
// every row has a valid member id, 0 ≤ LocalActive < LocalCapacity ≤
// MaxCapacity, a known freshness, UpstreamUnknown true exactly when not fresh,
// a PPM within 0..MaxRequestPPM when fresh and zero otherwise, and a distinct
// RotatingRank within 0..MaxMembers-1; and the rows are in rank-tuple order.
func (d Decision) Validate() error {
	n := len(d.Scores)
	switch {
	case n != len(d.EligibleIDs) || n > bounds.MaxMembers:
		return ErrInvalidDecision
	case d.Reason == ReasonSelected && (n == 0 || d.SelectedMemberID != d.Scores[0].MemberID):
		return ErrInvalidDecision
	case d.Reason == ReasonNoEligibleMember && (n != 0 || d.SelectedMemberID != ""):
		return ErrInvalidDecision
	case d.Reason != ReasonSelected && d.Reason != ReasonNoEligibleMember:
		return ErrInvalidDecision
	}
	var ranks, members uint32
	for i, id := range d.EligibleIDs {
		if !bounds.ValidMemberID(id) || (i > 0 && d.EligibleIDs[i-1] >= id) {
			return ErrInvalidDecision
		}
	}
	for i, s := range d.Scores {
		if !s.valid() || ranks&(1<<s.RotatingRank) != 0 {
			return ErrInvalidDecision
		}
		ranks |= 1 << s.RotatingRank
		// Every row names a distinct eligible member: with as many rows as
		// eligible ids, the rows then cover the eligible set exactly.
		pos, found := slices.BinarySearch(d.EligibleIDs, s.MemberID)
		if !found || members&(1<<pos) != 0 {
			return ErrInvalidDecision
		}
		members |= 1 << pos
		if i > 0 && compareScores(d.Scores[i-1], s) >= 0 {
			return ErrInvalidDecision
		}
	}
	return nil
}

// valid reports whether one score row is within its bounds and consistent.
func (s Score) valid() bool {
	fresh := s.UpstreamFreshness == FreshnessFresh
	switch {
	case !bounds.ValidMemberID(s.MemberID):
		return false
	case s.LocalCapacity < bounds.MinConcurrency || s.LocalCapacity > bounds.MaxConcurrency:
		return false
	case s.LocalActive < 0 || s.LocalActive >= s.LocalCapacity:
		return false
	case s.RotatingRank < 0 || s.RotatingRank >= bounds.MaxMembers:
		return false
	case s.UpstreamUnknown == fresh:
		return false
	case fresh:
		return s.UpstreamPPM >= 0 && s.UpstreamPPM <= MaxRequestPPM
	case s.UpstreamFreshness == FreshnessStale, s.UpstreamFreshness == FreshnessFailed,
		s.UpstreamFreshness == FreshnessUnknown:
		return s.UpstreamPPM == 0
	default:
		return false
	}
}

// compareScores orders two score rows by the rank tuple.
func compareScores(a, b Score) int {
	return a.key().compare(b.key())
}

// key returns the rank tuple of a score row. The row must be within the
// bounds Score.valid checks.
func (s Score) key() rankKey {
	return newRankKey(s.LocalActive, s.LocalCapacity, s.UpstreamUnknown, s.UpstreamPPM, s.RotatingRank)
}

// rankKey is the rank tuple (local ratio active/capacity, upstream unknown,
// upstream PPM, rotating rank) in a pointer-free form that compares with two
// integer comparisons, so Rank can sort keys on the stack.
type rankKey struct {
	// active and capacity are the local ratio, compared by cross-products.
	active, capacity int64
	// tie packs the rest of the tuple, most significant first: unknown in bit
	// 55, PPM (≤ MaxRequestPPM < 2^51) in bits 4..54 and the rotating rank
	// (< MaxMembers = 2^4) in bits 0..3.
	tie int64
}

// newRankKey builds the key of one row. ppm must be within 0..MaxRequestPPM
// (zero when unknown) and rotating within 0..MaxMembers-1.
func newRankKey(active, capacity int, unknown bool, ppm int64, rotating int) rankKey {
	tie := ppm<<4 | int64(rotating)
	if unknown {
		tie |= 1 << 55
	}
	return rankKey{active: int64(active), capacity: int64(capacity), tie: tie}
}

// compare orders two tuples. Local ratios are compared exactly by
// cross-multiplying, never rounded: a ranked row's active count is below its
// capacity ≤ MaxCapacity, so both products are below 10^10.
func (a rankKey) compare(b rankKey) int {
	left, right := a.active*b.capacity, b.active*a.capacity
	switch {
	case left < right:
		return -1
	case left > right:
		return 1
	case a.tie < b.tie:
		return -1
	case a.tie > b.tie:
		return 1
	default:
		return 0
	}
}
