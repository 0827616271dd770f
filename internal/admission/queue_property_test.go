package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
)

// queueModel drives a tier with a queue through a sequence of operations
// and checks the queue's invariants after every step: ceilings hold, every
// lease is held by somebody who reads it, no request waits while a member
// could admit it, each request leaves once, and admissions follow the
// dispatch order (bands, then each tenant's arrival order).
type queueModel struct {
	t     testing.TB
	tier  *admission.Tier
	clock *clocktesting.FakeClock
	ids   []string
	cfg   admission.Config

	mu       sync.Mutex // guards notReady: WithInputs reads it on any goroutine.
	notReady map[string]bool

	quiesced map[string]bool
	queued   chan struct{}
	results  chan modelResult
	nextID   int
	live     map[int]*modelWaiter // started, not reported.
	held     []*admission.Lease
	steps    []string       // what happened, for a failure's message.
	last     map[string]int // the counts at the last check, by member id and "tier".
	// ends counts how requests ended, so a run shows it reached each way.
	ends map[string]int
}

// modelWaiter is one request the model started.
type modelWaiter struct {
	id       int
	who      admission.Tenant
	enqueued time.Time
	waiting  bool // known to have started waiting.
	cancel   context.CancelFunc
}

// modelResult is how one request of the model ended.
type modelResult struct {
	id     int
	lease  *admission.Lease
	waited admission.Waited
	err    error
}

// modelTenants are the tenants of the model: two share the default band,
// one is above it and one below.
var modelTenants = []admission.Tenant{{Name: "a"}, {Name: "b"}, {Name: "vip", Priority: 5}, {Name: "batch", Priority: -5}}

func newQueueModel(t testing.TB) *queueModel {
	m := &queueModel{
		t: t, clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), ids: []string{"a", "b", "c"},
		notReady: map[string]bool{}, quiesced: map[string]bool{}, last: map[string]int{}, ends: map[string]int{},
		queued: make(chan struct{}, 64), results: make(chan modelResult, 64), live: map[int]*modelWaiter{},
	}
	m.cfg = admission.Config{Strategy: bounds.StrategyCapacity, Members: members(2, m.ids...),
		Queue: &admission.Queue{MaxRequests: 6, MaxWait: 3 * time.Second, MaxRequestsPerTenant: 4}}
	tier, err := admission.New(m.cfg, admission.WithClock(m.clock), admission.WithInputs(m.inputs),
		admission.WithQueued(func() { m.queued <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	m.tier = tier
	return m
}

// inputs are the members' readiness as the model has it now.
func (m *queueModel) inputs() admission.Inputs {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := make(map[string]bool, len(m.ids))
	for _, id := range m.ids {
		r[id] = !m.notReady[id]
	}
	return admission.Inputs{Ready: r}
}

func (m *queueModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("after %v: %s", m.steps, fmt.Sprintf(format, args...))
}

// step runs one operation chosen by op and arg, then settles and checks.
func (m *queueModel) step(op, arg uint8) {
	m.t.Helper()
	before := m.waitingByTenant()
	var expect []int // requests that must report after this step.
	switch op % 7 {
	case 0, 1: // arrivals are the commonest step.
		m.arrive(modelTenants[int(arg)%len(modelTenants)])
	case 2:
		if len(m.held) > 0 {
			i := int(arg) % len(m.held)
			l := m.held[i]
			m.held = slices.Delete(m.held, i, i+1)
			m.steps = append(m.steps, "release "+l.Member())
			l.Release()
		}
	case 3:
		if w := m.pick(arg); w != nil {
			m.steps = append(m.steps, fmt.Sprintf("cancel %d", w.id))
			w.cancel()
			expect = append(expect, w.id)
		}
	case 4:
		d := time.Duration(arg%4) * time.Second
		m.steps = append(m.steps, fmt.Sprintf("+%v", d))
		m.clock.Step(d)
		for _, w := range m.live {
			if w.waiting && !m.clock.Now().Before(w.enqueued.Add(m.cfg.Queue.MaxWait)) {
				expect = append(expect, w.id)
			}
		}
	case 5:
		id := m.ids[int(arg)%len(m.ids)]
		if arg%2 == 0 {
			m.quiesced[id] = !m.quiesced[id]
			m.steps = append(m.steps, fmt.Sprintf("quiesce %s=%v", id, m.quiesced[id]))
			intent := admission.Intent{Members: map[string]string{}}
			for q, on := range m.quiesced {
				if on {
					intent.Members[q] = "swap"
				}
			}
			if err := m.tier.SetIntent(intent); err != nil {
				m.fatalf("SetIntent: %v", err)
			}
		} else {
			m.mu.Lock()
			m.notReady[id] = !m.notReady[id]
			m.steps = append(m.steps, fmt.Sprintf("notReady %s=%v", id, m.notReady[id]))
			m.mu.Unlock()
			m.tier.Dispatch()
		}
	case 6:
		m.reconfigure(arg)
	}
	m.settle(expect, before)
	m.check()
}

// arrive starts one request and returns once it waits or has its result.
func (m *queueModel) arrive(who admission.Tenant) {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &modelWaiter{id: m.nextID, who: who, enqueued: m.clock.Now(), cancel: cancel}
	m.nextID++
	m.live[w.id] = w
	m.steps = append(m.steps, fmt.Sprintf("arrive %d %s", w.id, who.Name))
	in := m.inputs()
	go func() {
		l, waited, err := m.tier.Wait(ctx, in, who)
		m.results <- modelResult{id: w.id, lease: l, waited: waited, err: err}
	}()
	select {
	case <-m.queued:
		w.waiting = true
	case r := <-m.results:
		m.report(r)
	case <-time.After(failSafe):
		m.fatalf("request %d neither waited nor ended", w.id)
	}
}

// reconfigure changes the ceilings and the queue's bounds.
func (m *queueModel) reconfigure(arg uint8) {
	cfg := m.cfg
	cfg.Members = members(1+int(arg)%3, m.ids...)
	switch arg % 4 {
	case 0:
		cfg.Queue = nil
	default:
		cfg.Queue = &admission.Queue{MaxRequests: 1 + int(arg)%8, MaxWait: time.Duration(1+int(arg)%4) * time.Second}
		cfg.Queue.MaxRequestsPerTenant = 1 + int(arg/8)%cfg.Queue.MaxRequests
	}
	m.steps = append(m.steps, fmt.Sprintf("reconfigure %d %+v", cfg.Members[0].MaxConcurrency, cfg.Queue))
	if err := m.tier.Reconfigure(cfg); err != nil {
		m.fatalf("Reconfigure: %v", err)
	}
	if cfg.Queue == nil {
		// The model needs a queue for its next arrivals to wait: put one
		// back at once, as an operator would.
		cfg.Queue = &admission.Queue{MaxRequests: 4, MaxWait: 2 * time.Second}
		if err := m.tier.Reconfigure(cfg); err != nil {
			m.fatalf("Reconfigure: %v", err)
		}
	}
	m.cfg = cfg
}

// pick returns a waiting request chosen by arg, or nil.
func (m *queueModel) pick(arg uint8) *modelWaiter {
	var ws []*modelWaiter
	for _, w := range m.live {
		if w.waiting {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	slices.SortFunc(ws, func(a, b *modelWaiter) int { return a.id - b.id })
	return ws[int(arg)%len(ws)]
}

// settle collects the results the step produced: those of expect, then one
// for every started request that no longer waits. It then checks that each
// request admitted left no older request of its tenant, nor any request of
// a higher band, waiting.
func (m *queueModel) settle(expect []int, before map[admission.Tenant][]int) {
	m.t.Helper()
	var admitted []int
	take := func() {
		select {
		case r := <-m.results:
			if r.lease != nil {
				admitted = append(admitted, r.id)
			}
			m.report(r)
		case <-time.After(failSafe):
			m.fatalf("%d requests started, %d wait, and no result came", len(m.live), m.tier.QueueStats().Waiting)
		}
	}
	for _, id := range expect {
		for m.live[id] != nil {
			take()
		}
	}
	for len(m.live) > m.tier.QueueStats().Waiting {
		take()
	}
	for _, id := range admitted {
		var who admission.Tenant
		for tn, ids := range before {
			if slices.Contains(ids, id) {
				who = tn
			}
		}
		for tn, ids := range before {
			for _, other := range ids {
				if m.live[other] == nil {
					continue
				}
				if tn.Priority > who.Priority || tn == who && other < id {
					m.fatalf("request %d (%+v) was admitted while %d (%+v) still waits", id, who, other, tn)
				}
			}
		}
	}
}

// waitingByTenant returns the ids of the waiting requests by tenant.
func (m *queueModel) waitingByTenant() map[admission.Tenant][]int {
	out := map[admission.Tenant][]int{}
	for _, w := range m.live {
		if w.waiting {
			out[w.who] = append(out[w.who], w.id)
		}
	}
	return out
}

// report takes one request's result: a lease or an error, never both.
func (m *queueModel) report(r modelResult) {
	m.t.Helper()
	w := m.live[r.id]
	if w == nil {
		m.fatalf("request %d reported twice", r.id)
	}
	delete(m.live, r.id)
	w.cancel()
	switch {
	case r.lease != nil && r.err != nil:
		m.fatalf("request %d has a lease and an error %v", r.id, r.err)
	case r.lease != nil && r.waited.Queued:
		m.held = append(m.held, r.lease)
		m.ends["admitted after waiting"]++
	case r.lease != nil:
		m.held = append(m.held, r.lease)
		m.ends["admitted"]++
	case !w.waiting && r.waited.Queued:
		m.fatalf("request %d says it waited, but never started waiting", r.id)
	default:
		for _, e := range modelEnds {
			if errors.Is(r.err, e) {
				m.ends[e.Error()]++
				return
			}
		}
		m.fatalf("request %d ended with %v", r.id, r.err)
	}
}

// modelEnds are the errors a request of the model may end with.
var modelEnds = []error{admission.ErrQueueFull, admission.ErrQueueTimeout, admission.ErrClientGone, admission.ErrTierFull, admission.ErrNoEligibleMember}

// check verifies the invariants that hold between steps.
func (m *queueModel) check() {
	m.t.Helper()
	s := m.tier.Snapshot()
	qs := m.tier.QueueStats()
	if s.Active != len(m.held) {
		m.fatalf("the tier counts %d leases, the requests hold %d", s.Active, len(m.held))
	}
	// A lowered ceiling only blocks new admissions: a count may stand
	// above its ceiling, but never grow while it does.
	if s.Ceiling > 0 && s.Active > s.Ceiling && s.Active > m.last["tier"] {
		m.fatalf("tier active %d past its ceiling %d", s.Active, s.Ceiling)
	}
	m.last["tier"] = s.Active
	room := false
	in := m.inputs()
	for _, ms := range s.Members {
		if ms.Ceiling > 0 && ms.Active > ms.Ceiling && ms.Active > m.last[ms.ID] {
			m.fatalf("member %s active %d past its ceiling %d", ms.ID, ms.Active, ms.Ceiling)
		}
		m.last[ms.ID] = ms.Active
		if !ms.Removed && !ms.Quiesced && in.Ready[ms.ID] && ms.Active < ms.Ceiling {
			room = true
		}
	}
	if qs.Waiting > 0 && room && (s.Ceiling == 0 || s.Active < s.Ceiling) {
		m.fatalf("%d requests wait while a member could admit one: %+v", qs.Waiting, s)
	}
	if m.cfg.Queue != nil && qs.Waiting > m.cfg.Queue.MaxRequests {
		m.fatalf("%d requests wait, past the queue's %d", qs.Waiting, m.cfg.Queue.MaxRequests)
	}
	if qs.Waiting != len(m.live) {
		m.fatalf("%d requests wait, %d started requests have not ended", qs.Waiting, len(m.live))
	}
}

// finish ends every request and checks nothing is left.
func (m *queueModel) finish() {
	m.t.Helper()
	for _, w := range m.live {
		w.cancel()
	}
	for len(m.live) > 0 {
		select {
		case r := <-m.results:
			m.report(r)
		case <-time.After(failSafe):
			m.fatalf("%d requests never ended", len(m.live))
		}
	}
	for _, l := range m.held {
		l.Release()
	}
	m.held = nil
	if s, qs := m.tier.Snapshot(), m.tier.QueueStats(); s.Active != 0 || qs.Waiting != 0 {
		m.fatalf("after the end: %d leases, %d waiting", s.Active, qs.Waiting)
	}
}

// TestQueueProperties runs random sequences of arrivals, releases,
// cancellations, deadlines, quiesces, readiness changes and
// reconfigurations, checking the queue's invariants after every step.
func TestQueueProperties(t *testing.T) {
	const sequences, steps = 200, 120
	ends := map[string]int{}
	for seed := range uint64(sequences) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed)) //nolint:gosec // reproducible sequences, not secrets.
		m := newQueueModel(t)
		for range steps {
			op := rng.Uint32()
			m.step(byte(op&0xff), byte(op>>8&0xff))
		}
		m.finish()
		for k, n := range m.ends {
			ends[k] += n
		}
	}
	// The sequences reach every way a request can end.
	for _, k := range []string{"admitted", "admitted after waiting"} {
		if ends[k] == 0 {
			t.Errorf("no request was %s: %v", k, ends)
		}
	}
	for _, e := range modelEnds {
		if ends[e.Error()] == 0 {
			t.Errorf("no request ended with %v: %v", e, ends)
		}
	}
	t.Logf("how requests ended: %v", ends)
}

// FuzzQueue is TestQueueProperties driven by the fuzzer: each pair of bytes
// is one step.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 2, 0, 4, 3, 6, 5})
	f.Add([]byte{0, 0, 1, 1, 0, 2, 3, 0, 5, 0, 5, 2, 2, 0, 6, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		m := newQueueModel(t)
		for i := 0; i+1 < len(ops); i += 2 {
			m.step(ops[i], ops[i+1])
		}
		m.finish()
	})
}
