package admission_test

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// benchTier returns a tier of n members (one member: a direct tier) and the
// inputs a router would pass: everything ready, every member with a fresh
// pressure sample.
func benchTier(b *testing.B, strategy admission.Strategy, n int) (*admission.Tier, admission.Inputs) {
	all := ids(n)
	if n == 1 {
		strategy = ""
	}
	tier := newTier(b, admission.Config{Strategy: strategy, Members: members(64, all...)})
	in := admission.Inputs{Ready: ready(all)}
	if strategy == admission.StrategyCapacity {
		in.Pressure = make(map[string]scheduler.Pressure, n)
		for i, id := range all {
			in.Pressure[id] = fresh(int64(1000 * (i % 3)))
		}
	}
	return tier, in
}

func BenchmarkAcquireRelease(b *testing.B) {
	cases := []struct {
		strategy admission.Strategy
		n        int
	}{{"Direct", 1}}
	for _, s := range []admission.Strategy{admission.StrategyRoundRobin, admission.StrategyCapacity} {
		for _, n := range []int{2, 4, 16} {
			cases = append(cases, struct {
				strategy admission.Strategy
				n        int
			}{s, n})
		}
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("strategy=%s/members=%d", c.strategy, c.n), func(b *testing.B) {
			tier, in := benchTier(b, c.strategy, c.n)
			b.ReportAllocs()
			for b.Loop() {
				l, err := tier.Acquire(in)
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
			}
		})
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, strategy := range []admission.Strategy{admission.StrategyRoundRobin, admission.StrategyCapacity} {
		b.Run(fmt.Sprintf("strategy=%s/members=16", strategy), func(b *testing.B) {
			tier, in := benchTier(b, strategy, 16)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := tier.Acquire(in)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release()
				}
			})
		})
	}
}

// BenchmarkAcquireReleaseTiers spreads acquisitions round-robin over 1 or 64
// Capacity tiers of 4 members each (4 or 256 members in all). Each tier owns
// its state, so the cost per decision must not depend on how many tiers
// exist.
func BenchmarkAcquireReleaseTiers(b *testing.B) {
	for _, count := range []int{1, 64} {
		b.Run(fmt.Sprintf("tiers=%d", count), func(b *testing.B) {
			tiers := make([]*admission.Tier, count)
			inputs := make([]admission.Inputs, count)
			for i := range tiers {
				tiers[i], inputs[i] = benchTier(b, admission.StrategyCapacity, 4)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l, err := tiers[i].Acquire(inputs[i])
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
				if i++; i == count {
					i = 0
				}
			}
		})
	}
}
