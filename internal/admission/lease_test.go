package admission_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

func TestReleaseIsIdempotent(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(2, ab...)})
	l1 := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	l2 := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	l1.Release()
	l1.Release()
	if s := tier.Snapshot(); s.Active != 1 || activeOf(tier, l2.Member()) != 1 || activeOf(tier, l1.Member()) != 0 {
		t.Fatalf("after releasing one lease twice: %+v", s)
	}
	l2.Release()
	if s := tier.Snapshot(); s.Active != 0 {
		t.Fatalf("after releasing both: %+v", s)
	}
}

// TestConcurrentReleaseDecrementsOnce releases one lease from 100 goroutines
// started by one barrier, next to a second lease on the same member.
func TestConcurrentReleaseDecrementsOnce(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(0, "solo")})
	in := admission.Inputs{Ready: ready([]string{"solo"})}
	l, other := acquire(t, tier, in), acquire(t, tier, in)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			<-start
			l.Release()
		})
	}
	close(start)
	wg.Wait()
	if s := tier.Snapshot(); s.Active != 1 || s.Members[0].Active != 1 {
		t.Fatalf("after 100 concurrent releases of one lease: %+v, want active 1", s)
	}
	other.Release()
	if s := tier.Snapshot(); s.Active != 0 {
		t.Fatalf("after releasing the other lease: %+v", s)
	}
}

// highWater tracks a counter and the largest value it ever held.
type highWater struct {
	now, max atomic.Int64
}

func (h *highWater) inc() {
	v := h.now.Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (h *highWater) dec() { h.now.Add(-1) }

// TestConcurrentCeilings releases 24 goroutines at once against a tier whose
// members have ceilings 3 and 2 under a tier ceiling of 4, round after round.
// Each goroutine counts itself as a holder after Acquire returns and stops
// counting before Release, so the holder high-water marks bound the true
// reservation counts at every instant. Leases are held until every goroutine
// of the round has tried, which makes the number of admissions per round
// exact. A concurrent observer checks every Snapshot it can take.
func TestConcurrentCeilings(t *testing.T) {
	const (
		goroutines = 24
		rounds     = 150
		tierMax    = 4
	)
	ceilings := map[string]int64{"a": 3, "b": 2}
	for _, strategy := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			tier := newTier(t, admission.Config{Strategy: strategy, MaxConcurrency: tierMax, Members: []admission.MemberConfig{
				{ID: "a", MaxConcurrency: 3}, {ID: "b", MaxConcurrency: 2},
			}})
			holders := map[string]*highWater{"a": {}, "b": {}}
			var tierHolders highWater

			stop := make(chan struct{})
			observed := make(chan error, 1)
			go func() {
				var err error
				for n := 0; ; n++ {
					select {
					case <-stop:
						observed <- err
						return
					default:
					}
					s := tier.Snapshot()
					sum := 0
					for _, m := range s.Members {
						sum += m.Active
						if int64(m.Active) > ceilings[m.ID] && err == nil {
							err = fmt.Errorf("snapshot %d: member %s active %d above ceiling", n, m.ID, m.Active)
						}
					}
					if (sum != s.Active || s.Active > tierMax) && err == nil {
						err = fmt.Errorf("snapshot %d: tier active %d, Σ members %d, ceiling %d", n, s.Active, sum, tierMax)
					}
				}
			}()

			for round := range rounds {
				in := admission.Inputs{Ready: ready(ab)}
				want := tierMax
				switch round % 3 {
				case 1:
					in.Ready["b"] = false
					want = 3 // a's ceiling.
				case 2:
					in.Ready["a"] = false
					want = 2 // b's ceiling.
				}
				if strategy == bounds.StrategyCapacity {
					in.Pressure = map[string]scheduler.Pressure{"a": fresh(int64(round % 5)), "b": fresh(2)}
				}
				start, tried := make(chan struct{}), make(chan struct{})
				var attempts sync.WaitGroup
				var admitted, refused atomic.Int64
				var done sync.WaitGroup
				attempts.Add(goroutines)
				for range goroutines {
					done.Go(func() {
						<-start
						l, err := tier.Acquire(in)
						if err != nil {
							if !errors.Is(err, admission.ErrTierFull) {
								t.Errorf("Acquire() = %v, want a lease or ErrTierFull", err)
							}
							refused.Add(1)
							attempts.Done()
							return
						}
						admitted.Add(1)
						holders[l.Member()].inc()
						tierHolders.inc()
						attempts.Done()
						<-tried
						tierHolders.dec()
						holders[l.Member()].dec()
						l.Release()
					})
				}
				close(start)
				attempts.Wait()
				close(tried)
				done.Wait()
				if admitted.Load() != int64(want) || refused.Load() != goroutines-int64(want) {
					t.Fatalf("round %d: admitted %d refused %d, want %d admitted", round, admitted.Load(), refused.Load(), want)
				}
				s := tier.Snapshot()
				checkSums(t, s)
				if s.Active != 0 {
					t.Fatalf("round %d ended with active %d", round, s.Active)
				}
			}
			close(stop)
			if err := <-observed; err != nil {
				t.Fatal(err)
			}
			for id, h := range holders {
				if h.max.Load() > ceilings[id] {
					t.Errorf("member %s held %d leases at once, ceiling %d", id, h.max.Load(), ceilings[id])
				}
			}
			if tierHolders.max.Load() != tierMax {
				t.Errorf("tier held at most %d leases at once, want exactly the ceiling %d", tierHolders.max.Load(), tierMax)
			}
		})
	}
}

// TestConcurrentChurn interleaves acquires and immediate releases from many
// goroutines with quiesce changes, and checks the same invariants.
func TestConcurrentChurn(t *testing.T) {
	tier := newTier(t, admission.Config{Strategy: bounds.StrategyCapacity, MaxConcurrency: 4, Members: []admission.MemberConfig{
		{ID: "a", MaxConcurrency: 3}, {ID: "b", MaxConcurrency: 2},
	}})
	holders := map[string]*highWater{"a": {}, "b": {}}
	var tierHolders highWater
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			<-start
			in := admission.Inputs{Ready: ready(ab)}
			for i := range 300 {
				if g == 0 && i%50 == 0 {
					if err := errors.Join(tier.Quiesce(admission.MemberScope("a"), "churn"), tier.Readmit(admission.MemberScope("a"))); err != nil {
						t.Error(err)
					}
				}
				l, err := tier.Acquire(in)
				if err != nil {
					continue
				}
				holders[l.Member()].inc()
				tierHolders.inc()
				tierHolders.dec()
				holders[l.Member()].dec()
				l.Release()
			}
		})
	}
	close(start)
	wg.Wait()
	checkSums(t, tier.Snapshot())
	if s := tier.Snapshot(); s.Active != 0 {
		t.Fatalf("active %d after all releases", s.Active)
	}
	if holders["a"].max.Load() > 3 || holders["b"].max.Load() > 2 || tierHolders.max.Load() > 4 {
		t.Fatalf("high-water a=%d b=%d tier=%d exceed ceilings 3, 2, 4",
			holders["a"].max.Load(), holders["b"].max.Load(), tierHolders.max.Load())
	}
}
