package loadgen

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// arrivalStream is the PCG stream of the open-loop schedule.
const arrivalStream = 0xa771_7a15

// Run sends the configured load and returns what it measured. It returns
// an error wrapping ErrInvalidConfig for an invalid Config and nothing else:
// failed requests are counted in the Result. When ctx ends Run stops
// issuing, cancels the requests in flight (counted as ErrorCanceled) and
// returns what it measured so far. Run returns only after every goroutine
// it started has ended.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	client := c.Client
	if client == nil {
		client = newDefaultClient(c.Concurrency)
		defer client.CloseIdleConnections()
	}
	q, err := newRequester(&c, client)
	if err != nil {
		return nil, err
	}
	agg := newAggregator(c.Mode, c.Seed)

	// stop is closed when no further request may be issued: the duration
	// elapsed or ctx ended. The request limit is counted by the schedulers.
	stop := make(chan struct{})
	var stopOnce sync.Once
	closeStop := func() { stopOnce.Do(func() { close(stop) }) }
	watchDone := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Go(func() {
		var expired <-chan time.Time
		if c.Duration > 0 {
			t := c.Clock.NewTimer(c.Duration)
			defer t.Stop()
			expired = t.C()
		}
		select {
		case <-expired:
		case <-ctx.Done():
		case <-watchDone:
		}
		closeStop()
	})

	start := c.Clock.Now()
	if c.Mode == OpenLoop {
		runOpen(ctx, &c, q, agg, stop)
	} else {
		runClosed(ctx, &c, q, agg, stop)
	}
	close(watchDone)
	watchers.Wait()
	return agg.result(c.Clock.Now().Sub(start)), nil
}

// runClosed runs Concurrency workers until the limit is reached or stop is
// closed, and waits for them.
func runClosed(ctx context.Context, c *Config, q *requester, agg *aggregator, stop <-chan struct{}) {
	var issued struct {
		sync.Mutex
		n int
	}
	take := func() bool {
		if stopped(ctx, stop) {
			return false
		}
		issued.Lock()
		defer issued.Unlock()
		if c.Requests > 0 && issued.n >= c.Requests {
			return false
		}
		issued.n++
		return true
	}
	var wg sync.WaitGroup
	for range c.Concurrency {
		wg.Go(func() {
			for take() {
				agg.add(q.do(ctx))
			}
		})
	}
	wg.Wait()
}

// runOpen issues requests at Poisson arrival times until the limit is
// reached or stop is closed, and waits for the requests in flight.
func runOpen(ctx context.Context, c *Config, q *requester, agg *aggregator, stop <-chan struct{}) {
	next := arrivals(c.Seed, c.Rate)
	slots := make(chan struct{}, c.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	var due time.Duration
	start := c.Clock.Now()
	for n := 0; c.Requests == 0 || n < c.Requests; n++ {
		due += next()
		if c.Duration > 0 && due >= c.Duration {
			return
		}
		if wait := due - c.Clock.Since(start); wait > 0 {
			t := c.Clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-stop:
				t.Stop()
				return
			}
		}
		if stopped(ctx, stop) {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			agg.drop()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			agg.add(q.do(ctx))
		})
	}
}

// stopped reports whether no further request may be issued. stop is
// closed when ctx ends, but asynchronously, so ctx is checked as well.
func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return ctx.Err() != nil
	}
}

// arrivals returns the generator of Poisson inter-arrival times with a mean
// of rate per second: exponentially distributed gaps drawn from a PCG
// seeded with seed, so one seed always gives the same schedule.
func arrivals(seed uint64, rate float64) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, arrivalStream)) //nolint:gosec // a seeded PCG makes the schedule reproducible; nothing here is secret.
	return func() time.Duration {
		return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	}
}

// aggregator folds request results into a Result under one lock; a
// request's samples are added in one critical section.
type aggregator struct {
	mu   sync.Mutex
	seed uint64
	res  Result
}

// newAggregator returns an empty aggregator whose reservoirs are seeded
// from seed.
func newAggregator(mode Mode, seed uint64) *aggregator {
	return &aggregator{seed: seed, res: Result{
		Mode:         mode,
		Statuses:     map[int]int{},
		Errors:       map[ErrorKind]int{},
		HeaderCounts: map[string]int{},
		HeaderE2E:    map[string]*Distribution{},
		TTFT:         newDistribution(seed),
		ITL:          newDistribution(seed + 1),
		E2E:          newDistribution(seed + 2),
	}}
}

// add records one request.
func (a *aggregator) add(r requestResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.res.Sent++
	if r.status != 0 {
		a.res.Statuses[r.status]++
	}
	if r.header != "" {
		a.res.HeaderCounts[r.header]++
	}
	if r.failure != "" {
		a.res.Errors[r.failure]++
		return
	}
	a.res.Succeeded++
	a.res.Tokens += r.tokens
	a.res.E2E.Add(r.e2e)
	if r.header != "" {
		d := a.res.HeaderE2E[r.header]
		if d == nil {
			nd := newDistribution(a.seed + uint64(len(a.res.HeaderE2E)) + 3)
			d = &nd
			a.res.HeaderE2E[r.header] = d
		}
		d.Add(r.e2e)
	}
	if r.ttft >= 0 {
		a.res.TTFT.Add(r.ttft)
	}
	for _, d := range r.itl {
		a.res.ITL.Add(d)
	}
}

// drop records an open-loop arrival that was not sent.
func (a *aggregator) drop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.res.Dropped++
}

// result returns the Result with its elapsed time; the aggregator is not
// used afterwards.
func (a *aggregator) result(elapsed time.Duration) *Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.res
	r.Elapsed = elapsed
	for _, d := range []*Distribution{&r.TTFT, &r.ITL, &r.E2E} {
		d.sort()
	}
	for _, d := range r.HeaderE2E {
		d.sort()
	}
	return &r
}
