package admission_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// benchTier returns a tier of n members (one member: a direct tier) and the
// inputs a router would pass: everything ready, every member with a fresh
// pressure sample.
func benchTier(b *testing.B, strategy bounds.Strategy, n int) (*admission.Tier, admission.Inputs) {
	all := ids(n)
	if n == 1 {
		strategy = ""
	}
	tier := newTier(b, admission.Config{Strategy: strategy, Members: members(64, all...)})
	in := admission.Inputs{Ready: ready(all)}
	if strategy == bounds.StrategyCapacity {
		in.Pressure = make(map[string]scheduler.Pressure, n)
		for i, id := range all {
			in.Pressure[id] = fresh(int64(1000 * (i % 3)))
		}
	}
	return tier, in
}

func BenchmarkAcquireRelease(b *testing.B) {
	cases := []struct {
		strategy bounds.Strategy
		n        int
	}{{"Direct", 1}}
	for _, s := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
		for _, n := range []int{2, 4, 16} {
			cases = append(cases, struct {
				strategy bounds.Strategy
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
	for _, strategy := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
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
				tiers[i], inputs[i] = benchTier(b, bounds.StrategyCapacity, 4)
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

// BenchmarkWaitNoWait is BenchmarkAcquireRelease through Wait on a tier
// with a queue that never fills: what a request that does not wait pays for
// the queue being there.
func BenchmarkWaitNoWait(b *testing.B) {
	for _, strategy := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
		b.Run(fmt.Sprintf("strategy=%s/members=16", strategy), func(b *testing.B) {
			all := ids(16)
			tier := newTier(b, admission.Config{Strategy: strategy, Members: members(64, all...),
				Queue: &admission.Queue{MaxRequests: 100, MaxWait: time.Second}})
			_, in := benchTier(b, strategy, 16)
			who := admission.Tenant{Name: "t"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, _, err := tier.Wait(ctx, in, who)
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
			}
		})
	}
}

// BenchmarkQueuedHandoff measures one release handing its member to a
// request waiting in the queue: the release, the dispatch that admits the
// waiter and the waiter waking. One member with ceiling 1, one waiter at a
// time.
func BenchmarkQueuedHandoff(b *testing.B) {
	queuedCh := make(chan struct{}, 1)
	tier := newTier(b, admission.Config{Members: members(1, "a"), Queue: &admission.Queue{MaxRequests: 1, MaxWait: admission.MaxQueueWait}},
		admission.WithQueued(func() { queuedCh <- struct{}{} }))
	in := admission.Inputs{Ready: ready([]string{"a"})}
	held, err := tier.Acquire(in)
	if err != nil {
		b.Fatal(err)
	}
	leases := make(chan *admission.Lease)
	go func() {
		for {
			l, _, err := tier.Wait(context.Background(), in, admission.Tenant{})
			if err != nil {
				close(leases)
				return
			}
			leases <- l
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		<-queuedCh
		held.Release()
		held = <-leases
	}
	if err := tier.Quiesce(admission.TierScope(), "done"); err != nil {
		b.Fatal(err)
	}
	held.Release()
	for range leases {
	}
}

// BenchmarkWaiterMemory reports the heap one waiting request holds in the
// queue (its waiter, timer and wake channel; not its goroutine, which
// serves the request whether it waits or not), from 1000 waiters at once.
func BenchmarkWaiterMemory(b *testing.B) {
	const n = 1000
	for b.Loop() {
		queuedCh := make(chan struct{}, n)
		tier := newTier(b, admission.Config{Members: members(1, "a"), Queue: &admission.Queue{MaxRequests: n, MaxWait: admission.MaxQueueWait}},
			admission.WithQueued(func() { queuedCh <- struct{}{} }))
		in := admission.Inputs{Ready: ready([]string{"a"})}
		held, err := tier.Acquire(in)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan struct{}, n)
		for i := range n {
			go func() {
				_, _, _ = tier.Wait(ctx, in, admission.Tenant{Name: fmt.Sprint(i % 10)})
				done <- struct{}{}
			}()
		}
		for range n {
			<-queuedCh
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		cancel()
		for range n {
			<-done
		}
		held.Release()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/waiter")
	}
}
