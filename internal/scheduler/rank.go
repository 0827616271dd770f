package scheduler

import (
	"math/bits"
	"slices"

	"github.com/sluice-dev/sluice/api/bounds"
)

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
	if n < MinMembers || n > bounds.MaxMembers {
		return Decision{}, ErrInvalidMembership
	}
	for i, id := range membership {
		if !bounds.ValidMemberID(id) || (i > 0 && membership[i-1] >= id) {
			return Decision{}, ErrInvalidMembership
		}
	}
	if cursor < 0 || cursor >= n {
		return Decision{}, ErrInvalidCursor
	}
	if len(candidates) < MinMembers || len(candidates) > bounds.MaxMembers {
		return Decision{}, ErrInvalidCandidates
	}

	// One pass validates every candidate and inserts the key of each one that
	// can be ranked into a sorted array on the stack (at most 16 rows, so an
	// insertion sort of pointer-free keys). An invalid candidate anywhere
	// discards the work. The tuple ends in the rotating rank, distinct for
	// every member, so the order is total and independent of the input order.
	// A bit set of membership positions proves the candidates unique and
	// names the eligible members.
	var seen, eligible uint32
	var keys [bounds.MaxMembers]rankKey
	var order [bounds.MaxMembers]uint8 // order[j] is the candidate of row j.
	m := 0
	for i := range candidates {
		c := &candidates[i]
		// Candidates usually arrive in membership order, so the position
		// of the candidate in the list is tried before a search.
		pos := i
		if i >= n || membership[i] != c.MemberID {
			pos = memberIndex(membership, c.MemberID)
		}
		if pos < 0 || seen&(1<<pos) != 0 {
			return Decision{}, ErrInvalidCandidates
		}
		seen |= 1 << pos
		if c.Active < 0 || c.Active > MaxActive || c.Capacity < bounds.MinConcurrency || c.Capacity > bounds.MaxConcurrency {
			return Decision{}, ErrInvalidCandidate
		}
		if err := c.Pressure.Validate(); err != nil {
			return Decision{}, err
		}
		if !c.Eligible || c.Active >= c.Capacity {
			continue
		}
		eligible |= 1 << pos
		// A validated pressure has PPM zero unless fresh.
		key := newRankKey(c.Active, c.Capacity, c.Pressure.Freshness != FreshnessFresh, c.Pressure.PPM, (pos-cursor+n)%n)
		j := m
		for ; j > 0 && key.compare(keys[j-1]) < 0; j-- {
			keys[j], order[j] = keys[j-1], order[j-1]
		}
		keys[j], order[j] = key, uint8(i)
		m++
	}
	if m == 0 {
		return Decision{Reason: ReasonNoEligibleMember, EligibleIDs: []string{}, Scores: []Score{}}, nil
	}

	// The rows are written field by field into freshly zeroed memory, which
	// costs the garbage collector one barrier per string instead of a copy of
	// every row.
	scores, ids := newRows(m)
	for j := range scores {
		c := &candidates[order[j]]
		s := &scores[j]
		s.MemberID = c.MemberID
		s.LocalActive = c.Active
		s.LocalCapacity = c.Capacity
		s.UpstreamFreshness = c.Pressure.Freshness
		s.UpstreamUnknown = c.Pressure.Freshness != FreshnessFresh
		s.UpstreamPPM = c.Pressure.PPM // zero unless fresh.
		s.RotatingRank = int(keys[j].tie & (bounds.MaxMembers - 1))
	}
	// The membership is sorted, so eligible positions in ascending order are
	// the eligible ids in sorted order.
	for k := range ids {
		pos := bits.TrailingZeros32(eligible)
		ids[k] = membership[pos]
		eligible &^= 1 << pos
	}
	return Decision{
		SelectedMemberID: scores[0].MemberID,
		Reason:           ReasonSelected,
		EligibleIDs:      ids,
		Scores:           scores,
	}, nil
}

// memberIndex returns the position of id in the sorted membership, or -1.
func memberIndex(membership []string, id string) int {
	if pos, found := slices.BinarySearch(membership, id); found {
		return pos
	}
	return -1
}

// newRows returns the score rows and eligible ids of a decision with m rows,
// 1 ≤ m ≤ MaxMembers, both zeroed and of capacity m, carved from one
// allocation: a decision is built on every admission, and one allocation
// costs less than two. The backing arrays come in four lengths, so at most
// the rows a length rounds up to are wasted.
func newRows(m int) ([]Score, []string) {
	switch {
	case m <= 2:
		b := new(struct {
			scores [2]Score
			ids    [2]string
		})
		return b.scores[:m:m], b.ids[:m:m]
	case m <= 4:
		b := new(struct {
			scores [4]Score
			ids    [4]string
		})
		return b.scores[:m:m], b.ids[:m:m]
	case m <= 8:
		b := new(struct {
			scores [8]Score
			ids    [8]string
		})
		return b.scores[:m:m], b.ids[:m:m]
	default:
		b := new(struct {
			scores [bounds.MaxMembers]Score
			ids    [bounds.MaxMembers]string
		})
		return b.scores[:m:m], b.ids[:m:m]
	}
}
