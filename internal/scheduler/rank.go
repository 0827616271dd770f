package scheduler

import "slices"

// Candidate is one member offered to Rank: its reservation count and ceiling
// at this instant, whether the admission owner found it eligible (configured,
// ready and not quiesced), and its normalized upstream pressure.
type Candidate struct {
	// MemberID is the member's id; it must be in the membership.
	MemberID string
	// Eligible is false when the member must not be selected (not ready or
	// quiesced). A candidate whose Active has reached its Capacity is dropped
	// even when Eligible is true.
	Eligible bool
	// Active is the member's reservation count, 0..MaxActive.
	Active int
	// Capacity is the member's ceiling, MinCapacity..MaxCapacity.
	Capacity int
	// Pressure is the member's upstream pressure; it must pass
	// Pressure.Validate.
	Pressure Pressure
}

// Rank orders the candidates of one tier and selects the best.
//
// membership is the full configured member list of the tier: 2..MaxMembers
// valid member ids, sorted and unique. cursor is the admission owner's
// rotating cursor, 0..N-1. candidates are 2..MaxMembers distinct members of
// the membership in any order, each within its bounds. Any other input returns
// one of the package's fixed errors and a zero Decision.
//
// Candidates that are not eligible or whose Active has reached Capacity are
// dropped. The rest are ordered by the tuple (local ratio Active/Capacity,
// upstream unknown false before true, upstream PPM ascending, rotating rank),
// where the local ratio is compared exactly by integer cross-products and the
// rotating rank is (index in membership − cursor) mod N, distinct for every
// member. The first row wins. When nothing remains, the Decision has reason
// ReasonNoEligibleMember and no selection; that is an ordinary outcome, not
// an error. The order of candidates never changes the Decision, and Rank
// keeps no reference to its arguments: the returned slices are new.
func Rank(membership []string, cursor int, candidates []Candidate) (Decision, error) {
	n := len(membership)
	if n < MinMembers || n > MaxMembers {
		return Decision{}, ErrInvalidMembership
	}
	for i, id := range membership {
		if !ValidMemberID(id) || (i > 0 && membership[i-1] >= id) {
			return Decision{}, ErrInvalidMembership
		}
	}
	if cursor < 0 || cursor >= n {
		return Decision{}, ErrInvalidCursor
	}
	if len(candidates) < MinMembers || len(candidates) > MaxMembers {
		return Decision{}, ErrInvalidCandidates
	}

	// Validate every candidate before ranking any, and note the position of
	// each in the membership. A bit set of positions proves uniqueness.
	var seen uint32
	var positions [MaxMembers]int
	for i := range candidates {
		c := &candidates[i]
		pos := memberIndex(membership, i, c.MemberID)
		if pos < 0 || seen&(1<<pos) != 0 {
			return Decision{}, ErrInvalidCandidates
		}
		seen |= 1 << pos
		positions[i] = pos
		if c.Active < 0 || c.Active > MaxActive || c.Capacity < MinCapacity || c.Capacity > MaxCapacity {
			return Decision{}, ErrInvalidCandidate
		}
		if err := c.Pressure.Validate(); err != nil {
			return Decision{}, err
		}
	}

	// Sort pointer-free keys on the stack with an insertion sort (at most 16
	// rows), then write the rows out once. The tuple ends in the rotating
	// rank, distinct for every member, so the order is total and independent
	// of the input order.
	type row struct {
		key  rankKey
		cand int
	}
	var rows [MaxMembers]row
	var eligiblePositions uint32
	m := 0
	for i := range candidates {
		c := &candidates[i]
		if !c.Eligible || c.Active >= c.Capacity {
			continue
		}
		eligiblePositions |= 1 << positions[i]
		// A validated pressure has PPM zero unless fresh.
		unknown := c.Pressure.Freshness != FreshnessFresh
		r := row{cand: i, key: newRankKey(c.Active, c.Capacity, unknown, c.Pressure.PPM, (positions[i]-cursor+n)%n)}
		j := m
		for ; j > 0 && r.key.compare(rows[j-1].key) < 0; j-- {
			rows[j] = rows[j-1]
		}
		rows[j] = r
		m++
	}
	if m == 0 {
		return Decision{Reason: ReasonNoEligibleMember, EligibleIDs: []string{}, Scores: []Score{}}, nil
	}

	scores := make([]Score, m)
	for j, r := range rows[:m] {
		c := &candidates[r.cand]
		fresh := c.Pressure.Freshness == FreshnessFresh
		scores[j] = Score{
			MemberID:          c.MemberID,
			LocalActive:       c.Active,
			LocalCapacity:     c.Capacity,
			UpstreamFreshness: c.Pressure.Freshness,
			UpstreamUnknown:   !fresh,
			RotatingRank:      int(r.key.tie & (MaxMembers - 1)),
		}
		if fresh {
			scores[j].UpstreamPPM = c.Pressure.PPM
		}
	}
	// The membership is sorted, so eligible positions in ascending order are
	// the eligible ids in sorted order.
	ids := make([]string, 0, m)
	for pos := range membership {
		if eligiblePositions&(1<<pos) != 0 {
			ids = append(ids, membership[pos])
		}
	}
	return Decision{
		SelectedMemberID: scores[0].MemberID,
		Reason:           ReasonSelected,
		EligibleIDs:      ids,
		Scores:           scores,
	}, nil
}

// memberIndex returns the position of id in the sorted membership, or -1.
// Candidates usually arrive in membership order, so position hint is tried
// before a binary search.
func memberIndex(membership []string, hint int, id string) int {
	if hint < len(membership) && membership[hint] == id {
		return hint
	}
	if pos, found := slices.BinarySearch(membership, id); found {
		return pos
	}
	return -1
}
