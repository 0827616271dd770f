package router

import (
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// recheckProbes is a ReadinessView and a Rechecker standing in for the
// readiness cache: Recheck marks the member not ready, as the cache does,
// and the test passes the probe with pass. Each Recheck also records the
// tier's admission state at the moment of the call, to prove it came
// before the intent change.
type recheckProbes struct {
	rt *Router // set after New; read only during Apply.

	mu       sync.Mutex
	ready    map[string]map[string]bool
	rechecks []string             // "tier#member", in call order.
	seen     []admission.Snapshot // the tier's admission state at each Recheck.
	// afterRead, when set, runs once after the next Ready read, before
	// Ready returns what it read: a change landing between the router's
	// readiness read and its Acquire.
	afterRead func()
}

func (p *recheckProbes) Ready(tier string) (map[string]bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.ready[tier]
	if !ok {
		return nil, tierstest.ErrUnknownTier
	}
	out, after := maps.Clone(m), p.afterRead
	p.afterRead = nil
	if after != nil {
		p.mu.Unlock()
		after()
		p.mu.Lock()
	}
	return out, nil
}

func (p *recheckProbes) Recheck(tier, member string) {
	ts, _ := p.rt.Tiers().Table().Lookup(tier)
	var snap admission.Snapshot
	if ts != nil {
		snap = ts.Admission().Snapshot()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rechecks = append(p.rechecks, tier+"#"+member)
	p.seen = append(p.seen, snap)
	if m := p.ready[tier]; m != nil {
		if _, ok := m[member]; ok {
			m[member] = false
		}
	}
}

// register adds the snapshot's tiers as the readiness cache would: members
// already known keep their state (a quiesced member's probes keep passing),
// new members are ready at once.
func (p *recheckProbes) register(s source.Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]map[string]bool{}
	for _, t := range tiers.ReadinessTiers(s) {
		m := map[string]bool{}
		for _, mb := range t.Members {
			ready, known := p.ready[t.Key][mb.ID]
			m[mb.ID] = ready || !known
		}
		next[t.Key] = m
	}
	p.ready = next
}

// pass is a probe of the member that passed.
func (p *recheckProbes) pass(tier, member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready[tier][member] = true
}

// calls returns the Rechecks so far and the admission states they saw, and
// forgets them.
func (p *recheckProbes) calls() ([]string, []admission.Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, s := p.rechecks, p.seen
	p.rechecks, p.seen = nil, nil
	return c, s
}

// readmitHarness is a Router with recheckProbes and one upstream per member
// id.
type readmitHarness struct {
	t      *testing.T
	rt     *Router
	probes *recheckProbes
	ups    map[string]*fakeMember
}

func newReadmitHarness(t *testing.T, ids ...string) *readmitHarness {
	t.Helper()
	p := &recheckProbes{}
	rt := New(Options{Readiness: p, Rechecker: p, Logger: slog.New(slog.DiscardHandler)})
	p.rt = rt
	t.Cleanup(rt.Close)
	h := &readmitHarness{t: t, rt: rt, probes: p, ups: map[string]*fakeMember{}}
	for _, id := range ids {
		h.ups[id] = newUpstream(t, id, nil)
	}
	return h
}

// tier returns tier key with aliases {alias} over the members ids and the
// quiesce intent q (nil: none).
func (h *readmitHarness) tier(key, alias string, q *v1alpha1.QuiesceSpec, ids ...string) source.Tier {
	var members []sourcetest.Member
	for _, id := range ids {
		members = append(members, sourcetest.Member{ID: id, Endpoint: h.ups[id].srv.URL})
	}
	return sourcetest.Tier(key, []string{alias}, "", members, func(s *v1alpha1.ReplicaTierSpec) { s.Quiesce = q })
}

// apply registers the tiers with the probes, then applies them, as
// cmd/router does.
func (h *readmitHarness) apply(tiers ...source.Tier) {
	s := source.Snapshot{Tiers: tiers}
	h.probes.register(s)
	h.rt.Tiers().Apply(s)
}

// send makes one request for alias and returns the status, the member that
// served it and the router's error code.
func (h *readmitHarness) send(alias string) (int, string, string) {
	h.t.Helper()
	rec := httptest.NewRecorder()
	h.rt.ServeHTTP(rec, httptest.NewRequestWithContext(h.t.Context(), http.MethodPost, pathChatCompletions, strings.NewReader(chat(alias))))
	body, _ := io.ReadAll(rec.Result().Body)
	code := ""
	if rec.Code != http.StatusOK {
		code = apierrortest.Code(h.t, body)
	}
	return rec.Code, rec.Header().Get(headerMember), code
}

// served sends n requests for alias and returns the members that served
// them; every request must succeed.
func (h *readmitHarness) served(alias string, n int) []string {
	h.t.Helper()
	var out []string
	for range n {
		status, member, code := h.send(alias)
		if status != http.StatusOK {
			h.t.Fatalf("request for %s = %d %s", alias, status, code)
		}
		out = append(out, member)
	}
	return out
}

// refused sends a request for alias that must be refused with code.
func (h *readmitHarness) refused(alias, code string) {
	h.t.Helper()
	if status, member, got := h.send(alias); status != http.StatusServiceUnavailable || got != code {
		h.t.Fatalf("request for %s = %d %q (member %q), want 503 %s", alias, status, got, member, code)
	}
}

func memberQuiesce(tierReason string, members ...string) *v1alpha1.QuiesceSpec {
	q := &v1alpha1.QuiesceSpec{Tier: tierReason}
	for _, id := range members {
		if q.Members == nil {
			q.Members = map[string]v1alpha1.QuiesceReason{}
		}
		q.Members[id] = "maintenance"
	}
	return q
}

// TestReadmissionRechecksMember readmits a quiesced member: the Rechecker
// is told about that member only, once, while admission still holds it
// quiesced, and no request reaches it until its probe passes.
func TestReadmissionRechecksMember(t *testing.T) {
	h := newReadmitHarness(t, "a", "b", "c", "e")
	quiesced := h.tier("ns/llama", "llama", memberQuiesce("", "a", "c"), "a", "b", "c")
	h.apply(quiesced)
	if got := h.served("llama", 3); slices.ContainsFunc(got, func(m string) bool { return m != "b" }) {
		t.Fatalf("quiesced members served requests: %v", got)
	}
	if calls, _ := h.probes.calls(); len(calls) != 0 {
		t.Fatalf("Recheck before any readmission: %v", calls)
	}

	// Readmit a; c stays quiesced.
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("", "c"), "a", "b", "c"))
	calls, seen := h.probes.calls()
	if !slices.Equal(calls, []string{"ns/llama#a"}) {
		t.Fatalf("Recheck calls = %v, want ns/llama#a once", calls)
	}
	if m := seen[0].Members[0]; m.ID != "a" || !m.Quiesced {
		t.Fatalf("at Recheck, admission held a as %+v, want still quiesced", m)
	}
	if got := h.served("llama", 4); slices.ContainsFunc(got, func(m string) bool { return m != "b" }) {
		t.Fatalf("requests before a's probe passed went to %v, want b only", got)
	}
	if n := h.ups["a"].requests.Load(); n != 0 {
		t.Fatalf("a received %d requests before its probe passed", n)
	}

	h.probes.pass("ns/llama", "a")
	if got := h.served("llama", 2); !slices.Contains(got, "a") || slices.Contains(got, "c") {
		t.Fatalf("after a's probe passed requests went to %v, want a among them and never c", got)
	}
	// The same intent again readmits nobody.
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("", "c"), "a", "b", "c"))
	if calls, _ := h.probes.calls(); len(calls) != 0 {
		t.Fatalf("Recheck without a readmission: %v", calls)
	}
	// Of a and c, both quiesced, a leaves the tier and c is readmitted in
	// the same change, which also adds e: only c is rechecked (the readiness
	// cache registers e afresh).
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("", "a", "c"), "a", "b", "c"))
	h.apply(h.tier("ns/llama", "llama", nil, "b", "c", "e"))
	if calls, _ := h.probes.calls(); !slices.Equal(calls, []string{"ns/llama#c"}) {
		t.Fatalf("Recheck calls = %v, want ns/llama#c only", calls)
	}
}

// TestReadmissionScopes proves the router keeps tier and member intent
// apart when readmitting: a member readmit does not readmit the tier, a
// tier readmit does not readmit a quiesced member, and a readmission
// rechecks exactly the members it makes eligible.
func TestReadmissionScopes(t *testing.T) {
	h := newReadmitHarness(t, "a", "b", "d")
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("maintenance", "a"), "a", "b"),
		h.tier("ns/direct", "direct", memberQuiesce("maintenance"), "d"))
	h.refused("llama", "tier_quiesced")
	h.refused("direct", "tier_quiesced")

	// Member readmit under a quiesced tier: the tier stays quiesced, and
	// nothing is eligible yet, so nothing is rechecked.
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("maintenance"), "a", "b"),
		h.tier("ns/direct", "direct", memberQuiesce("maintenance"), "d"))
	h.refused("llama", "tier_quiesced")
	if calls, _ := h.probes.calls(); len(calls) != 0 {
		t.Fatalf("Recheck while the tier stays quiesced: %v", calls)
	}

	// Quiesce a again, then readmit the tier alone: a stays quiesced and is
	// not rechecked; b becomes eligible and is rechecked first.
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("maintenance", "a"), "a", "b"),
		h.tier("ns/direct", "direct", memberQuiesce("maintenance"), "d"))
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("", "a"), "a", "b"),
		h.tier("ns/direct", "direct", nil, "d"))
	calls, seen := h.probes.calls()
	slices.Sort(calls)
	if !slices.Equal(calls, []string{"ns/direct#d", "ns/llama#b"}) {
		t.Fatalf("Recheck calls after the tier readmits = %v, want b and d", calls)
	}
	for _, s := range seen {
		if !s.Quiesced {
			t.Fatalf("at Recheck, admission already had the tier readmitted: %+v", s)
		}
	}
	h.refused("llama", "no_eligible_member")
	h.refused("direct", "no_eligible_member")
	h.probes.pass("ns/llama", "b")
	h.probes.pass("ns/direct", "d")
	if got := h.served("llama", 3); slices.Contains(got, "a") {
		t.Fatalf("the tier readmit readmitted member a: %v", got)
	}
	if got := h.served("direct", 1); got[0] != "d" {
		t.Fatalf("direct tier served by %v", got)
	}

	// Readmit a: only a is rechecked, and the tier stays readmitted.
	h.apply(h.tier("ns/llama", "llama", nil, "a", "b"), h.tier("ns/direct", "direct", nil, "d"))
	if calls, _ := h.probes.calls(); !slices.Equal(calls, []string{"ns/llama#a"}) {
		t.Fatalf("Recheck calls = %v, want ns/llama#a", calls)
	}
	h.probes.pass("ns/llama", "a")
	if got := h.served("llama", 2); !slices.Contains(got, "a") || !slices.Contains(got, "b") {
		t.Fatalf("after readmitting a requests went to %v, want a and b", got)
	}
	if n := h.ups["a"].requests.Load(); n != 1 {
		t.Fatalf("a received %d requests, want 1", n)
	}
}

// TestReadmissionWithoutRechecker proves a Router without a Rechecker
// applies readmissions as before.
func TestReadmissionWithoutRechecker(t *testing.T) {
	f := newFixture(t, fixtureOptions{noRechecker: true})
	up := newUpstream(t, "a", nil)
	other := newUpstream(t, "b", nil)
	members := []sourcetest.Member{{ID: "a", Endpoint: up.srv.URL}, {ID: "b", Endpoint: other.srv.URL}}
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", members, func(s *v1alpha1.ReplicaTierSpec) { s.Quiesce = memberQuiesce("", "a") }))
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", members))
	got := []string{quick(t, f), quick(t, f)}
	if !slices.Contains(got, "a") {
		t.Fatalf("readmitted member a not served: %v", got)
	}
}

// TestReadmissionBetweenReadinessAndAcquire lands a member's readmission
// between a request's readiness read, which still shows the quiesced member
// ready, and its Acquire: admission refuses the stale inputs (the
// readmission epoch moved), and the router's second attempt reads the
// member's recheck, so the request never reaches the member before its
// probe passes.
func TestReadmissionBetweenReadinessAndAcquire(t *testing.T) {
	h := newReadmitHarness(t, "a", "b")
	h.apply(h.tier("ns/llama", "llama", memberQuiesce("", "a"), "a", "b"))
	h.probes.mu.Lock()
	h.probes.ready["ns/llama"]["b"] = false // only a could take the request.
	h.probes.afterRead = func() { h.apply(h.tier("ns/llama", "llama", nil, "a", "b")) }
	h.probes.mu.Unlock()

	h.refused("llama", "no_eligible_member")
	if n := h.ups["a"].requests.Load(); n != 0 {
		t.Fatalf("a received %d requests before its probe passed", n)
	}
	if calls, _ := h.probes.calls(); !slices.Equal(calls, []string{"ns/llama#a"}) {
		t.Fatalf("Recheck calls = %v, want ns/llama#a once", calls)
	}
	h.probes.pass("ns/llama", "a")
	if got := h.served("llama", 2); !slices.Equal(got, []string{"a", "a"}) {
		t.Fatalf("after a's probe passed requests went to %v, want a", got)
	}
}
