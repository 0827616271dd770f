package loadgen

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/enginesim"
)

// awaitTimeout bounds every wait on an engine state in these tests; it is
// only reached when a test is broken.
const awaitTimeout = 30 * time.Second

func TestRunClosedLoop(t *testing.T) {
	const requests, tokens = 24, 5
	for _, tc := range []struct {
		api      API
		noStream bool
	}{
		{ChatCompletions, false}, {Completions, false}, {Responses, false},
		{ChatCompletions, true}, {Completions, true}, {Responses, true},
	} {
		t.Run(string(tc.api)+map[bool]string{true: "/non-streaming", false: "/streaming"}[tc.noStream], func(t *testing.T) {
			e := newEngine(t, nil, nil)
			res, err := Run(context.Background(), Config{
				BaseURL: e.baseURL(), Model: testModel, API: tc.api, NoStream: tc.noStream,
				MaxTokens: tokens, Concurrency: 4, Requests: requests, IncludeUsage: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ClosedLoop || res.Sent != requests || res.Succeeded != requests || res.Failed() != 0 ||
				res.Dropped != 0 || res.Tokens != requests*tokens {
				t.Fatalf("result = %+v", res)
			}
			if !maps.Equal(res.Statuses, map[int]int{200: requests}) {
				t.Fatalf("statuses = %v", res.Statuses)
			}
			if res.E2E.Count() != requests {
				t.Fatalf("E2E count %d", res.E2E.Count())
			}
			wantTTFT, wantITL := requests, requests*(tokens-1)
			if tc.noStream {
				wantTTFT, wantITL = 0, 0
			}
			if res.TTFT.Count() != wantTTFT || res.ITL.Count() != wantITL {
				t.Fatalf("TTFT count %d, ITL count %d", res.TTFT.Count(), res.ITL.Count())
			}
			if res.E2E.Quantile(0.5) < res.TTFT.Quantile(0.5) {
				t.Fatalf("E2E p50 %v below TTFT p50 %v", res.E2E.Quantile(0.5), res.TTFT.Quantile(0.5))
			}
			st := e.sim.Engine().State()
			if st.TotalRequests != requests || st.MaxInFlight > 4 {
				t.Fatalf("engine saw %d requests, max in flight %d", st.TotalRequests, st.MaxInFlight)
			}
		})
	}
}

func TestRunOpenLoop(t *testing.T) {
	const requests = 40
	e := newEngine(t, nil, nil)
	res, err := Run(context.Background(), Config{
		BaseURL: e.baseURL(), Model: testModel, Mode: OpenLoop, Rate: 4000, Seed: 3, Requests: requests,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != OpenLoop || res.Sent+res.Dropped != requests || res.Succeeded != res.Sent || res.Sent == 0 {
		t.Fatalf("result = %+v", res)
	}
	if got := e.sim.Engine().State().TotalRequests; got != uint64(res.Sent) { //nolint:gosec // Sent is a non-negative count.
		t.Fatalf("engine saw %d requests, sent %d", got, res.Sent)
	}
}

// steppingClock is a clock on which every Now call is an hour after the
// previous one, so every open-loop arrival is overdue and sent without
// waiting. Its blockAt-th Since call (the open loop calls Since once per
// arrival) blocks until release is closed, after closing reached.
type steppingClock struct {
	clock.RealClock
	mu      sync.Mutex
	now     time.Time
	since   int
	blockAt int
	reached chan struct{}
	release chan struct{}
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Hour)
	return c.now
}

func (c *steppingClock) Since(t time.Time) time.Duration {
	c.mu.Lock()
	c.since++
	block := c.since == c.blockAt
	c.mu.Unlock()
	if block {
		close(c.reached)
		<-c.release
	}
	return c.Now().Sub(t)
}

// TestRunOpenLoopDropsAtTheBound holds every request in the engine, so the
// in-flight bound is reached: the arrivals beyond it are dropped, not sent.
func TestRunOpenLoopDropsAtTheBound(t *testing.T) {
	e := newEngine(t, nil, func(c *enginesim.Config) { c.Stall = enginesim.Stall{Forever: true} })
	clk := &steppingClock{now: time.Unix(1_700_000_000, 0), blockAt: 11, reached: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(ctx, Config{
			BaseURL: e.baseURL(), Model: testModel, Mode: OpenLoop, Rate: 1, Concurrency: 2, Requests: 100, Clock: clk,
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The 11th arrival is being paced: the first ten were decided (two
	// sent and stalled, eight dropped). End the run there.
	<-clk.reached
	awaitEngine(t, e, func(s enginesim.State) bool { return s.ClockWaits == 2 })
	cancel()
	close(clk.release)
	res := <-done
	if res.Sent != 2 || res.Dropped != 8 || res.Errors[ErrorCanceled] != 2 || res.Succeeded != 0 {
		t.Fatalf("result: sent %d dropped %d errors %v", res.Sent, res.Dropped, res.Errors)
	}
}

func TestRunOpenLoopStopsOnCancel(t *testing.T) {
	e := newEngine(t, nil, func(c *enginesim.Config) { c.Stall = enginesim.Stall{Forever: true} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(ctx, Config{
			BaseURL: e.baseURL(), Model: testModel, Mode: OpenLoop, Rate: 1000, Concurrency: 2, Requests: 100_000,
		})
		done <- res
	}()
	awaitEngine(t, e, func(s enginesim.State) bool { return s.ClockWaits == 2 })
	cancel()
	res := <-done
	// A request may start between the cancellation and the scheduler
	// seeing it; it is then canceled too.
	if res.Sent < 2 || res.Errors[ErrorCanceled] != res.Sent || res.Succeeded != 0 {
		t.Fatalf("result: sent %d errors %v", res.Sent, res.Errors)
	}
}

func awaitEngine(t *testing.T, e *engine, cond func(enginesim.State) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	if err := e.sim.Engine().Await(ctx, cond); err != nil {
		t.Fatalf("engine state %+v: %v", e.sim.Engine().State(), err)
	}
}

// countingClock is a fake clock that counts its Now calls, so a test can
// wait until the generator has stamped a token before stepping time.
type countingClock struct {
	*clocktesting.FakeClock
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

func newCountingClock() *countingClock {
	return &countingClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), changed: make(chan struct{})}
}

// Now reads the time before counting the call, so a test that wakes up on
// the count cannot step the clock between the two.
func (c *countingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.FakeClock.Now()
	c.n++
	close(c.changed)
	c.changed = make(chan struct{})
	return now
}

// awaitNow waits until Now was called at least n times.
func (c *countingClock) awaitNow(t *testing.T, n int) {
	t.Helper()
	timeout := time.NewTimer(awaitTimeout)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		got, ch := c.n, c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("Now called %d times, want %d", got, n)
		}
	}
}

// TestRunMeasuresOnTheClock drives the engine and the generator with one
// fake clock: the engine waits 50 ms before the first token and 10 ms before
// each further one, so the measurements are exact.
func TestRunMeasuresOnTheClock(t *testing.T) {
	const ttft, itl, tokens = 50 * time.Millisecond, 10 * time.Millisecond, 4
	for _, api := range []API{ChatCompletions, Completions, Responses} {
		t.Run(string(api), func(t *testing.T) {
			clk := newCountingClock()
			e := newEngine(t, clk.FakeClock, func(c *enginesim.Config) { c.TTFTBase, c.ITLBase = ttft, itl })
			done := make(chan *Result, 1)
			go func() {
				res, err := Run(context.Background(), Config{
					BaseURL: e.baseURL(), Model: testModel, API: api, MaxTokens: tokens,
					Concurrency: 1, Requests: 1, Clock: clk,
				})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			// Now calls: the run's start and the request's start, then one
			// per token. Before each step, wait until the previous token was
			// stamped and the engine waits on its next delay.
			for k := range tokens {
				clk.awaitNow(t, 2+k)
				awaitEngine(t, e, func(s enginesim.State) bool { return s.ClockWaits == 1 })
				if k == 0 {
					clk.Step(ttft)
				} else {
					clk.Step(itl)
				}
			}
			res := <-done
			if res.Succeeded != 1 || res.Tokens != tokens {
				t.Fatalf("result = %+v", res)
			}
			if got := res.TTFT.Samples(); len(got) != 1 || got[0] != ttft {
				t.Fatalf("TTFT = %v, want [%v]", got, ttft)
			}
			for _, got := range res.ITL.Samples() {
				if got != itl {
					t.Fatalf("ITL = %v, want %d × %v", res.ITL.Samples(), tokens-1, itl)
				}
			}
			if res.ITL.Count() != tokens-1 {
				t.Fatalf("ITL count %d", res.ITL.Count())
			}
			if got, want := res.E2E.Samples(), ttft+(tokens-1)*itl; len(got) != 1 || got[0] != want {
				t.Fatalf("E2E = %v, want [%v]", got, want)
			}
			if res.Elapsed != ttft+(tokens-1)*itl {
				t.Fatalf("Elapsed = %v", res.Elapsed)
			}
		})
	}
}

func TestRunCountsFailures(t *testing.T) {
	tests := []struct {
		desc     string
		mutate   func(*enginesim.Config)
		cfg      func(*Config)
		statuses map[int]int
		errors   map[ErrorKind]int
	}{
		{
			desc:     "unknown model",
			cfg:      func(c *Config) { c.Model = "other" },
			statuses: map[int]int{404: 6},
			errors:   map[ErrorKind]int{ErrorStatus: 6},
		},
		{
			desc:     "truncated stream",
			mutate:   func(c *enginesim.Config) { c.TruncateSSE = true },
			statuses: map[int]int{200: 6},
			errors:   map[ErrorKind]int{ErrorStream: 6},
		},
		{
			desc:     "truncated Responses stream",
			mutate:   func(c *enginesim.Config) { c.TruncateSSE = true },
			cfg:      func(c *Config) { c.API = Responses },
			statuses: map[int]int{200: 6},
			errors:   map[ErrorKind]int{ErrorStream: 6},
		},
		{
			desc:     "malformed stream",
			mutate:   func(c *enginesim.Config) { c.MalformedSSE = true },
			statuses: map[int]int{200: 6},
			errors:   map[ErrorKind]int{ErrorMalformed: 6},
		},
		{
			desc:     "every request fails",
			mutate:   func(c *enginesim.Config) { c.ErrorRate = 1 },
			statuses: map[int]int{500: 6},
			errors:   map[ErrorKind]int{ErrorStatus: 6},
		},
		{
			desc:     "request timeout",
			mutate:   func(c *enginesim.Config) { c.Stall = enginesim.Stall{Forever: true} },
			cfg:      func(c *Config) { c.RequestTimeout = 20 * time.Millisecond },
			statuses: map[int]int{},
			errors:   map[ErrorKind]int{ErrorTimeout: 6},
		},
		{
			desc: "stream timeout after headers",
			mutate: func(c *enginesim.Config) {
				c.Stall, c.StallAt = enginesim.Stall{Forever: true}, enginesim.StallAfterFirstChunk
			},
			cfg:      func(c *Config) { c.RequestTimeout = 20 * time.Millisecond },
			statuses: map[int]int{200: 6},
			errors:   map[ErrorKind]int{ErrorTimeout: 6},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEngine(t, nil, tc.mutate)
			cfg := Config{BaseURL: e.baseURL(), Model: testModel, MaxTokens: 4, Concurrency: 2, Requests: 6}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 6 || res.Succeeded != 0 || !maps.Equal(res.Statuses, tc.statuses) || !maps.Equal(res.Errors, tc.errors) {
				t.Fatalf("result: sent %d succeeded %d statuses %v errors %v", res.Sent, res.Succeeded, res.Statuses, res.Errors)
			}
			if res.E2E.Count() != 0 || res.TTFT.Count() != 0 {
				t.Fatal("failed requests were measured")
			}
		})
	}
}

// TestRunErrorRateIsCounted checks a mixed outcome: with a seeded error
// rate the engine's decisions are reproducible, and every request is either
// a success or a 500.
func TestRunErrorRateIsCounted(t *testing.T) {
	const requests = 40
	e := newEngine(t, nil, func(c *enginesim.Config) { c.ErrorRate, c.Seed = 0.5, 9 })
	res, err := Run(context.Background(), Config{BaseURL: e.baseURL(), Model: testModel, Concurrency: 1, Requests: requests})
	if err != nil {
		t.Fatal(err)
	}
	if res.Statuses[500] == 0 || res.Statuses[200] == 0 || res.Statuses[500]+res.Statuses[200] != requests ||
		res.Errors[ErrorStatus] != res.Statuses[500] || res.Succeeded != res.Statuses[200] {
		t.Fatalf("statuses %v errors %v succeeded %d", res.Statuses, res.Errors, res.Succeeded)
	}
}

func TestRunTransportErrors(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there any more
	res, err := Run(context.Background(), Config{BaseURL: url + "/v1", Model: testModel, Concurrency: 1, Requests: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || res.Errors[ErrorTransport] != 3 || len(res.Statuses) != 0 {
		t.Fatalf("result = %+v", res)
	}
}

func TestRunCancelCountsInFlight(t *testing.T) {
	e := newEngine(t, nil, func(c *enginesim.Config) {
		c.Stall, c.StallAt = enginesim.Stall{Forever: true}, enginesim.StallAfterFirstChunk
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(ctx, Config{BaseURL: e.baseURL(), Model: testModel, Concurrency: 3, Requests: 100})
		done <- res
	}()
	awaitEngine(t, e, func(s enginesim.State) bool { return s.ClockWaits == 3 })
	cancel()
	res := <-done
	// The engine flushed the headers, but a client may not have read them
	// when the run is canceled, so only their upper bound is known.
	if res.Sent != 3 || res.Errors[ErrorCanceled] != 3 || res.Succeeded != 0 || res.Statuses[200] > 3 {
		t.Fatalf("result = %+v", res)
	}
}

func TestRunStopsAtDuration(t *testing.T) {
	const d = 50 * time.Millisecond
	e := newEngine(t, nil, nil)
	res, err := Run(context.Background(), Config{BaseURL: e.baseURL(), Model: testModel, Concurrency: 2, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent == 0 || res.Succeeded != res.Sent || res.Elapsed < d {
		t.Fatalf("result: sent %d succeeded %d elapsed %v", res.Sent, res.Succeeded, res.Elapsed)
	}
	res, err = Run(context.Background(), Config{BaseURL: e.baseURL(), Model: testModel, Mode: OpenLoop, Rate: 200, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != res.Sent || res.Elapsed < 0 {
		t.Fatalf("open loop result: sent %d succeeded %d", res.Sent, res.Succeeded)
	}
}

// TestRunCountsHeader counts a response header over every response, the
// way the demo counts the router's X-Sluice-Member.
func TestRunCountsHeader(t *testing.T) {
	cfg := enginesim.DefaultConfig()
	cfg.Model = testModel
	cfg.TTFTBase, cfg.TTFTPerSeq, cfg.ITLBase, cfg.ITLPerSeq = 0, 0, 0, 0
	sim, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Member", "m"+strconv.FormatInt(n.Add(1)%3, 10))
		sim.ServeHTTP(w, r)
	})
	e := newEngineWith(t, sim, h)
	res, err := Run(context.Background(), Config{
		BaseURL: e.baseURL(), Model: testModel, Concurrency: 1, Requests: 9, CountHeader: "x-member",
		Header: http.Header{"X-Extra": {"1"}}, APIKey: "k",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(res.HeaderCounts, map[string]int{"m0": 3, "m1": 3, "m2": 3}) {
		t.Fatalf("header counts = %v", res.HeaderCounts)
	}
	if len(res.HeaderE2E) != 3 {
		t.Fatalf("header latencies for %d values", len(res.HeaderE2E))
	}
	for v, d := range res.HeaderE2E {
		if d.Count() != 3 {
			t.Fatalf("%s: %d latencies", v, d.Count())
		}
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Run = %v", err)
	}
}

func TestResultThroughput(t *testing.T) {
	r := Result{Succeeded: 10, Elapsed: 2 * time.Second, Errors: map[ErrorKind]int{ErrorStatus: 2, ErrorStream: 1}}
	if r.Throughput() != 5 || r.Failed() != 3 {
		t.Fatalf("throughput %v failed %d", r.Throughput(), r.Failed())
	}
	if (&Result{}).Throughput() != 0 {
		t.Fatal("zero elapsed")
	}
}
