package scheduler_test

import (
	"math"
	"math/big"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// byteSource hands out fuzz bytes, then zeros once they run out.
type byteSource struct{ data []byte }

func (s *byteSource) next() int {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return int(b)
}

func (s *byteSource) next16() int { return s.next()<<8 | s.next() }

// fuzzCandidates builds a well-formed Rank input from fuzz bytes: a
// membership of 2..16 ids, a cursor, and 2..N distinct candidates in a
// fuzz-chosen order with small loads so that ties are common.
func fuzzCandidates(data []byte, size, cur int) ([]string, int, []scheduler.Candidate) {
	src := &byteSource{data: data}
	n := scheduler.MinMembers + size%(bounds.MaxMembers-scheduler.MinMembers+1)
	membership := memberIDs(n)
	cursor := cur % n
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for i := n - 1; i > 0; i-- { // Fisher–Yates, driven by the bytes.
		j := src.next() % (i + 1)
		order[i], order[j] = order[j], order[i]
	}
	k := scheduler.MinMembers + src.next()%(n-scheduler.MinMembers+1)
	cands := make([]scheduler.Candidate, k)
	for i := range cands {
		capacity := 1 + src.next()%6
		if src.next()%8 == 0 {
			capacity = 1 + src.next16()%bounds.MaxConcurrency
		}
		p := scheduler.UnknownPressure()
		switch src.next() % 5 {
		case 0:
			p = fresh(int64(src.next() % 4))
		case 1:
			p = fresh(int64(src.next16()) * int64(src.next16()) * 100_000 % (scheduler.MaxRequestPPM + 1))
		case 2:
			p = notFresh(scheduler.FreshnessStale)
		case 3:
			p = notFresh(scheduler.FreshnessFailed)
		}
		cands[i] = scheduler.Candidate{
			MemberID: membership[order[i]],
			Eligible: src.next()%4 != 0,
			Active:   src.next() % (capacity + 2),
			Capacity: capacity,
			Pressure: p,
		}
	}
	return membership, cursor, cands
}

// tupleLess is an independent statement of the rank tuple, using exact
// rationals, for checking Rank's row order.
func tupleLess(a, b scheduler.Score) bool {
	ra := big.NewRat(int64(a.LocalActive), int64(a.LocalCapacity))
	rb := big.NewRat(int64(b.LocalActive), int64(b.LocalCapacity))
	if c := ra.Cmp(rb); c != 0 {
		return c < 0
	}
	if a.UpstreamUnknown != b.UpstreamUnknown {
		return !a.UpstreamUnknown
	}
	if a.UpstreamPPM != b.UpstreamPPM {
		return a.UpstreamPPM < b.UpstreamPPM
	}
	return a.RotatingRank < b.RotatingRank
}

func FuzzRank(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint8(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint8(2), uint8(1))
	f.Add([]byte{255, 0, 255, 0, 7, 7, 7, 7, 1, 1, 1, 1, 1, 1, 1, 1}, uint8(14), uint8(9))
	f.Fuzz(func(t *testing.T, data []byte, size, cur uint8) {
		membership, cursor, cands := fuzzCandidates(data, int(size), int(cur))
		d, err := scheduler.Rank(membership, cursor, cands)
		if err != nil {
			t.Fatalf("Rank(well-formed input) error = %v", err)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("Rank() returned a decision failing Validate: %v\n%+v", err, d)
		}
		var wantEligible []string
		for _, cand := range cands {
			if cand.Eligible && cand.Active < cand.Capacity {
				wantEligible = append(wantEligible, cand.MemberID)
			}
		}
		slices.Sort(wantEligible)
		if len(wantEligible) == 0 {
			if d.Reason != scheduler.ReasonNoEligibleMember || d.SelectedMemberID != "" || len(d.EligibleIDs) != 0 {
				t.Fatalf("no candidate is eligible, Rank() = %+v", d)
			}
			return
		}
		if !slices.Equal(d.EligibleIDs, wantEligible) {
			t.Fatalf("EligibleIDs = %v, want %v", d.EligibleIDs, wantEligible)
		}
		i := slices.IndexFunc(cands, func(c scheduler.Candidate) bool { return c.MemberID == d.SelectedMemberID })
		if i < 0 || !cands[i].Eligible || cands[i].Active >= cands[i].Capacity {
			t.Fatalf("selected %q is not an eligible candidate below its ceiling", d.SelectedMemberID)
		}
		for j := 1; j < len(d.Scores); j++ {
			if !tupleLess(d.Scores[j-1], d.Scores[j]) {
				t.Fatalf("rows %d and %d out of tuple order: %+v", j-1, j, d.Scores)
			}
		}
		// Reversed and rotated inputs give the identical decision.
		perm := slices.Clone(cands)
		slices.Reverse(perm)
		if len(data) > 0 {
			r := int(data[len(data)-1]) % len(perm)
			perm = append(perm[r:], perm[:r]...)
		}
		again, err := scheduler.Rank(membership, cursor, perm)
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("permuted input gives %+v, %v; want %+v", again, err, d)
		}
	})
}

func FuzzMalformedRank(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(0), 0)
	f.Add([]byte{3, 1}, int64(-1), int64(1_000_000_001), 2)
	f.Fuzz(func(t *testing.T, data []byte, active, ppm int64, cursor int) {
		// Arbitrary, mostly malformed input never panics; whatever Rank
		// accepts yields a valid decision.
		membership, _, cands := fuzzCandidates(data, len(data), 0)
		cands[0].Active = int(active)
		cands[len(cands)-1].Pressure.PPM = ppm
		d, err := scheduler.Rank(membership, cursor, cands)
		if err == nil {
			if verr := d.Validate(); verr != nil {
				t.Fatalf("accepted input gave an invalid decision: %v", verr)
			}
		}
	})
}

func FuzzNormalize(f *testing.F) {
	f.Add(int64(time.Second), false, false, true, 8, 3.0, true, 1.0, true, 0.5, true)
	f.Add(int64(5*time.Second), false, false, true, 1, 1e9, true, 1e9, true, 1.0, true)
	f.Add(int64(5*time.Second+1), false, false, true, 4, 1.0, true, 0.0, false, 0.0, false)
	f.Add(int64(-1), false, false, true, 4, 1.0, true, 1.0, true, 0.1, true)
	f.Add(int64(0), true, false, true, 0, -1.0, true, math.NaN(), true, math.Inf(1), true)
	f.Add(int64(0), false, false, false, 4, 1.0, true, 1.0, true, 0.1, true)
	f.Fuzz(func(t *testing.T, ageNanos int64, zeroObserved, zeroNow, successful bool, capacity int,
		running float64, hasRunning bool, waiting float64, hasWaiting bool, kv float64, hasKV bool,
	) {
		observedAt, now := t0, t0.Add(time.Duration(ageNanos))
		if zeroObserved {
			observedAt = time.Time{}
		}
		if zeroNow {
			now = time.Time{}
		}
		var tel scheduler.Telemetry
		if hasRunning {
			tel.Running = &running
		}
		if hasWaiting {
			tel.Waiting = &waiting
		}
		if hasKV {
			tel.KVUsage = &kv
		}
		p := scheduler.Normalize(observedAt, now, successful, capacity, tel)
		if err := p.Validate(); err != nil {
			t.Fatalf("Normalize() = %+v fails Validate: %v", p, err)
		}
		if p.Freshness != scheduler.FreshnessFresh {
			if p.PPM != 0 {
				t.Fatalf("non-fresh pressure %+v carries a PPM", p)
			}
			if !successful && p.Freshness != scheduler.FreshnessFailed {
				t.Fatalf("unsuccessful sample classed %q, want failed", p.Freshness)
			}
			return
		}
		age := now.Sub(observedAt)
		if !successful || zeroObserved || zeroNow || age < 0 || age > scheduler.MaxSampleAge {
			t.Fatalf("fresh pressure from successful=%v age=%v zero=%v/%v", successful, age, zeroObserved, zeroNow)
		}
		if p.PPM < 0 || p.PPM > scheduler.MaxRequestPPM {
			t.Fatalf("PPM %d outside 0..%d", p.PPM, int64(scheduler.MaxRequestPPM))
		}
		want := int64(0)
		if p.RequestState == scheduler.SignalValid {
			// ceil((running+waiting)·1e6/capacity), exactly.
			num := new(big.Int).Mul(big.NewInt(int64(running)+int64(waiting)), big.NewInt(scheduler.PPMScale))
			q, r := new(big.Int).QuoRem(num, big.NewInt(int64(capacity)), new(big.Int))
			if r.Sign() > 0 {
				q.Add(q, big.NewInt(1))
			}
			want = q.Int64()
		}
		if p.KVState == scheduler.SignalValid {
			want = max(want, int64(math.Ceil(kv*scheduler.PPMScale)))
		}
		if p.PPM != want {
			t.Fatalf("PPM = %d, want %d for %+v", p.PPM, want, p)
		}
	})
}
