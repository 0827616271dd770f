package enginesim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Endpoint names one route of the simulator, for the request counts.
type Endpoint int

// The counted routes. The first four are inference endpoints: they count as
// in-flight requests, in TotalRequests and in the error rate.
const (
	// EndpointChatCompletions is POST /v1/chat/completions.
	EndpointChatCompletions Endpoint = iota
	// EndpointCompletions is POST /v1/completions.
	EndpointCompletions
	// EndpointResponses is POST /v1/responses.
	EndpointResponses
	// EndpointEmbeddings is POST /v1/embeddings.
	EndpointEmbeddings
	// EndpointModels is GET /v1/models.
	EndpointModels
	// EndpointHealth is GET /health.
	EndpointHealth
	// EndpointMetrics is GET /metrics.
	EndpointMetrics
)

// numEndpoints is the number of Endpoint values.
const numEndpoints = int(EndpointMetrics) + 1

var endpointNames = [numEndpoints]string{
	"chat_completions", "completions", "responses", "embeddings", "models", "health", "metrics",
}

// String returns the endpoint's name as used in /debug/stats.
func (ep Endpoint) String() string {
	if ep < 0 || int(ep) >= numEndpoints {
		return fmt.Sprintf("Endpoint(%d)", int(ep))
	}
	return endpointNames[ep]
}

// inference reports whether ep is an inference endpoint.
func (ep Endpoint) inference() bool { return ep >= 0 && ep <= EndpointEmbeddings }

// State is a consistent snapshot of an Engine.
type State struct {
	// Running is the number of request sequences holding a slot (hidden
	// load excluded).
	Running int
	// HiddenRunning is the number of slots held by hidden load.
	HiddenRunning int
	// Waiting is the number of requests queued for a slot.
	Waiting int
	// KVTokens is the prompt plus generated tokens of every running
	// sequence, hidden load included.
	KVTokens int64
	// KVCapacityTokens is the configured KV cache size.
	KVCapacityTokens int64
	// InFlight is the number of inference requests inside a handler now.
	InFlight int
	// MaxInFlight is the highest InFlight seen since start or Reset.
	MaxInFlight int
	// MaxRunning is the highest Running seen since start or Reset.
	MaxRunning int
	// ClockWaits is the number of requests blocked on the engine's clock
	// right now (a simulated latency, stall or metrics delay). A test with
	// a fake clock waits for it before stepping time.
	ClockWaits int
	// TotalRequests counts inference requests since start or Reset.
	TotalRequests uint64

	requests [numEndpoints]uint64
}

// Requests returns the number of requests ep received since start or Reset.
func (s State) Requests(ep Endpoint) uint64 {
	if ep < 0 || int(ep) >= numEndpoints {
		return 0
	}
	return s.requests[ep]
}

// KVUsage returns KVTokens / KVCapacityTokens capped at 1.
func (s State) KVUsage() float64 {
	if s.KVCapacityTokens <= 0 {
		return 0
	}
	return min(1, float64(s.KVTokens)/float64(s.KVCapacityTokens))
}

// ttftBuckets are the upper bounds of the time-to-first-token histogram, in
// seconds; they are vLLM's.
var ttftBuckets = [...]float64{
	0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
}

// histogram holds non-cumulative bucket counts; the last entry is +Inf.
type histogram struct {
	counts [len(ttftBuckets) + 1]uint64
	sum    float64
	count  uint64
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(ttftBuckets) && v > ttftBuckets[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

// metricsSnapshot is everything /metrics renders, copied under the lock.
type metricsSnapshot struct {
	state            State
	ttft             histogram
	promptTokens     int64
	generationTokens int64
	requestsServed   uint64
}

// Engine is the simulated continuous-batching engine: Config.MaxNumSeqs
// slots (Config.HiddenLoad of them held permanently), a FIFO queue of
// requests waiting for a slot, per-request latencies from Config.Latency,
// and the request statistics of /debug/stats. Server.Engine returns it. Its
// methods are safe for concurrent use. It starts no goroutine: every wait happens on the calling
// request's goroutine.
type Engine struct {
	cfg          Config
	clock        clock.Clock
	zeroTTFT     bool
	zeroITL      bool
	hiddenTokens int64

	mu               sync.Mutex
	running          int
	kvTokens         int64
	queue            []*waiter
	inFlight         int
	maxInFlight      int
	maxRunning       int
	clockWaits       int
	total            uint64
	requests         [numEndpoints]uint64
	ttft             histogram
	promptTokens     int64
	generationTokens int64
	requestsServed   uint64
	// changed is closed and cleared on every state change; it is made only
	// when Await needs it, so an unwatched engine allocates nothing.
	changed chan struct{}
}

// waiter is one request queued for a slot.
type waiter struct {
	prompt  int
	ready   chan struct{}
	granted bool
}

// newEngine returns an idle engine for cfg whose simulated time comes from
// clk (clock.RealClock{} outside tests).
func newEngine(cfg Config, clk clock.Clock) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Engine{
		cfg:          cfg,
		clock:        clk,
		zeroTTFT:     cfg.TTFTBase == 0 && cfg.TTFTPerSeq == 0,
		zeroITL:      cfg.ITLBase == 0 && cfg.ITLPerSeq == 0,
		hiddenTokens: int64(cfg.HiddenLoad) * int64(cfg.HiddenLoadTokens),
	}, nil
}

// State returns a snapshot of the engine.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stateLocked()
}

func (e *Engine) stateLocked() State {
	return State{
		Running:          e.running,
		HiddenRunning:    e.cfg.HiddenLoad,
		Waiting:          len(e.queue),
		KVTokens:         e.kvTokens + e.hiddenTokens,
		KVCapacityTokens: int64(e.cfg.KVCapacityTokens),
		InFlight:         e.inFlight,
		MaxInFlight:      e.maxInFlight,
		MaxRunning:       e.maxRunning,
		ClockWaits:       e.clockWaits,
		TotalRequests:    e.total,
		requests:         e.requests,
	}
}

// Await blocks until cond holds for the engine's state or ctx ends, and
// returns ctx's error in the latter case. cond is called without the
// engine's lock, first at once and then after state changes (several changes
// may be seen as one snapshot, so cond must test a state, not count events);
// it must not block.
func (e *Engine) Await(ctx context.Context, cond func(State) bool) error {
	for {
		e.mu.Lock()
		s := e.stateLocked()
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		ch := e.changed
		e.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Reset lowers MaxInFlight and MaxRunning to the current InFlight and
// Running (zero on an idle engine) and zeroes the request counts.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.maxInFlight = e.inFlight
	e.maxRunning = e.running
	e.total = 0
	e.requests = [numEndpoints]uint64{}
	e.notifyLocked()
}

// notifyLocked wakes every Await.
func (e *Engine) notifyLocked() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// begin counts one request to ep; an inference request also enters the
// in-flight count until end.
func (e *Engine) begin(ep Endpoint) {
	e.mu.Lock()
	e.requests[ep]++
	if ep.inference() {
		e.total++
		e.requestsServed++
		e.inFlight++
		e.maxInFlight = max(e.maxInFlight, e.inFlight)
	}
	e.notifyLocked()
	e.mu.Unlock()
}

// end leaves the in-flight count entered by begin.
func (e *Engine) end(ep Endpoint) {
	if !ep.inference() {
		return
	}
	e.mu.Lock()
	e.inFlight--
	e.notifyLocked()
	e.mu.Unlock()
}

// maxInFlightNow returns MaxInFlight.
func (e *Engine) maxInFlightNow() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxInFlight
}

// metrics copies what /metrics renders.
func (e *Engine) metrics() metricsSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return metricsSnapshot{
		state:            e.stateLocked(),
		ttft:             e.ttft,
		promptTokens:     e.promptTokens,
		generationTokens: e.generationTokens,
		requestsServed:   e.requestsServed,
	}
}

// sleep blocks for d on the engine's clock or until ctx ends. It counts in
// ClockWaits from the moment the timer exists.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	e.mu.Lock()
	t := e.clock.NewTimer(d)
	e.clockWaits++
	e.notifyLocked()
	e.mu.Unlock()
	return e.waitTimer(ctx, t)
}

// waitTimer waits for t or ctx, then leaves ClockWaits.
func (e *Engine) waitTimer(ctx context.Context, t clock.Timer) error {
	var err error
	select {
	case <-t.C():
	case <-ctx.Done():
		t.Stop()
		err = ctx.Err()
	}
	e.mu.Lock()
	e.clockWaits--
	e.notifyLocked()
	e.mu.Unlock()
	return err
}

// sleepUntilDone blocks until ctx ends, counting in ClockWaits meanwhile.
func (e *Engine) sleepUntilDone(ctx context.Context) error {
	e.mu.Lock()
	e.clockWaits++
	e.notifyLocked()
	e.mu.Unlock()
	<-ctx.Done()
	e.mu.Lock()
	e.clockWaits--
	e.notifyLocked()
	e.mu.Unlock()
	return ctx.Err()
}

// sequence is one request's hold on a slot, from admit to release.
type sequence struct {
	e         *Engine
	prompt    int
	generated int
	arrived   time.Time
	active    bool
}

// admit waits in FIFO order for a free slot and takes it, adding prompt
// tokens to the KV usage. It returns ctx's error, holding nothing, when ctx
// ends first.
func (e *Engine) admit(ctx context.Context, prompt int) (sequence, error) {
	e.mu.Lock()
	s := sequence{e: e, prompt: prompt, arrived: e.clock.Now(), active: true}
	if len(e.queue) == 0 && e.running+e.cfg.HiddenLoad < e.cfg.MaxNumSeqs {
		e.startLocked(prompt)
		e.notifyLocked()
		e.mu.Unlock()
		return s, nil
	}
	w := &waiter{prompt: prompt, ready: make(chan struct{})}
	e.queue = append(e.queue, w)
	e.notifyLocked()
	e.mu.Unlock()

	select {
	case <-w.ready:
		return s, nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.granted {
		// The slot arrived together with the cancellation: give it back.
		e.finishLocked(prompt)
	} else {
		for i, q := range e.queue {
			if q == w {
				e.queue = append(e.queue[:i], e.queue[i+1:]...)
				break
			}
		}
	}
	e.notifyLocked()
	return sequence{}, ctx.Err()
}

// startLocked gives one slot to a sequence with prompt tokens.
func (e *Engine) startLocked(prompt int) {
	e.running++
	e.maxRunning = max(e.maxRunning, e.running)
	e.kvTokens += int64(prompt)
	e.promptTokens += int64(prompt)
}

// finishLocked frees the slot of a sequence holding tokens KV tokens and
// hands free slots to the queue in FIFO order.
func (e *Engine) finishLocked(tokens int) {
	e.running--
	e.kvTokens -= int64(tokens)
	for len(e.queue) > 0 && e.running+e.cfg.HiddenLoad < e.cfg.MaxNumSeqs {
		w := e.queue[0]
		e.queue[0] = nil
		e.queue = e.queue[1:]
		e.startLocked(w.prompt)
		w.granted = true
		close(w.ready)
	}
	if len(e.queue) == 0 {
		e.queue = nil
	}
}

// prefill waits the prefill delay for the current batch. With token it then
// emits the first token and records the time to first token (measured from
// arrival, queueing included); embeddings prefill without a token.
func (s *sequence) prefill(ctx context.Context, token bool) error {
	n := 0
	if token {
		n = 1
	}
	return s.step(ctx, true, s.e.zeroTTFT, n)
}

// decode generates n more tokens, each after one inter-token latency for
// the batch of the moment. With zero latencies the n tokens are accounted at
// once.
func (s *sequence) decode(ctx context.Context, n int) error {
	if s.e.zeroITL {
		return s.step(ctx, false, true, n)
	}
	for range n {
		if err := s.step(ctx, false, false, 1); err != nil {
			return err
		}
	}
	return nil
}

// step waits one prefill delay or inter-token latency (none when zero) and
// then accounts tokens generated tokens.
func (s *sequence) step(ctx context.Context, prefill, zero bool, tokens int) error {
	e := s.e
	e.mu.Lock()
	if !zero {
		ttft, itl := e.cfg.Latency(e.running + e.cfg.HiddenLoad)
		d := itl
		if prefill {
			d = ttft
		}
		if d > 0 {
			t := e.clock.NewTimer(d)
			e.clockWaits++
			e.notifyLocked()
			e.mu.Unlock()
			if err := e.waitTimer(ctx, t); err != nil {
				return err
			}
			e.mu.Lock()
		}
	}
	if tokens > 0 {
		if s.generated == 0 {
			e.ttft.observe(e.clock.Since(s.arrived).Seconds())
		}
		s.generated += tokens
		e.kvTokens += int64(tokens)
		e.generationTokens += int64(tokens)
		e.notifyLocked()
	}
	e.mu.Unlock()
	return nil
}

// release frees the slot; calls after the first are no-ops.
func (s *sequence) release() {
	if !s.active {
		return
	}
	s.active = false
	e := s.e
	e.mu.Lock()
	e.finishLocked(s.prompt + s.generated)
	e.notifyLocked()
	e.mu.Unlock()
}
